# EDGE_VERSION: `git describe` of the source tree at configure time, or 0.0.0-dev.
set(EDGE_VERSION "0.0.0-dev")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS ${PROJECT_SOURCE_DIR}/.git)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --tags --always --dirty
                  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                  OUTPUT_VARIABLE _edge_git OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
                  RESULT_VARIABLE _edge_git_rc)
  if(_edge_git_rc EQUAL 0 AND _edge_git)
    if(_edge_git MATCHES "^v?[0-9]+\\.[0-9]+")
      string(REGEX REPLACE "^v" "" EDGE_VERSION "${_edge_git}")
    else()
      set(EDGE_VERSION "0.0.0-dev+g${_edge_git}")
    endif()
  endif()
endif()
message(STATUS "edge-agent version: ${EDGE_VERSION}")
