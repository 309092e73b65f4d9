# Compiler flags shared by every target of the project.

# ccache, when present, with paths under the source tree made relative (base_dir) and the
# build directory left out of the key (hash_dir off): a fresh clone elsewhere — CI's, on the
# machine of the session that built before it — hits the objects this checkout cached. The
# cost: an object's debug info may name the other checkout's build directory as its
# compilation directory (its source paths are relative to it); the code is the same.
find_program(EDGE_CCACHE ccache)
if(EDGE_CCACHE)
  set(_edge_ccache ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1
      ${EDGE_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${_edge_ccache})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_edge_ccache})
endif()

add_library(edge_build_flags INTERFACE)
target_compile_options(edge_build_flags INTERFACE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
if(EDGE_WERROR)
  target_compile_options(edge_build_flags INTERFACE -Werror)
endif()
target_compile_definitions(edge_build_flags INTERFACE _FILE_OFFSET_BITS=64)
# GCC 12's -Wrestrict misfires inside libstdc++'s std::string at -O2/-O3 (GCC bug 105329);
# it is off for that compiler only, every other warning stays an error.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(edge_build_flags INTERFACE -Wno-restrict)
endif()

if(EDGE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  # Not position-independent: UBSan's data for each check (a source location, type
  # descriptors) holds pointers — edge-agent at -O0 has 128 MB of .data and 4.7 million
  # relative relocations (113 MB of .rela.dyn) — and in a PIE the loader applies each at
  # start, dirtying every page of it: 0.82 s of every start of the agent, the controller or
  # its CLI before main on a machine with costly page faults, 0.52 s without
  # (bin/edge-agent --version). The integration tests start them hundreds of times: the
  # suite took 1 272 s at -j2, 840 s without PIE. Release builds stay PIE.
  add_link_options(-fsanitize=address,undefined -no-pie)
endif()

# edge_add_library(NAME SOURCES... DEPS...) — a project library with the shared flags.
function(edge_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC} PRIVATE edge_build_flags ${ARG_PRIVATE})
endfunction()

# edge_add_test(NAME SOURCES... DEPS... [TIMEOUT s] [LABELS ...] [PREFIX p] [WITHOUT_GRPC]) — a
# gtest binary registered with ctest. WITHOUT_GRPC: its main starts no gRPC thread
# (tests/support/test_main.cc), for a binary whose code never uses gRPC and whose tests fork.
function(edge_add_test name)
  cmake_parse_arguments(ARG "WITHOUT_GRPC" "TIMEOUT;PREFIX" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  if(TARGET edge_test_main AND ARG_WITHOUT_GRPC)
    set(_main edge_test_main_without_grpc)  # no gRPC thread beside the tests (test_main.cc)
  elseif(TARGET edge_test_main)
    set(_main edge_test_main)  # tests/support/test_main.cc
  else()
    set(_main GTest::gtest_main)
  endif()
  target_link_libraries(${name} PRIVATE edge_build_flags ${ARG_DEPS} GTest::gtest GTest::gmock ${_main})
  # Every test may use the test-support library (TempDir, WaitUntil, FakeExecutor).
  if(TARGET edge_test_support)
    target_link_libraries(${name} PRIVATE edge_test_support)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  # Tests find the built binaries and the source tree through BinDir() and SourceDir()
  # (tests/support/build_paths.h), not through paths compiled into every test source.
  # PREFIX names the tests of a binary that runs the same test sources as another.
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_PREFIX "${ARG_PREFIX}"
    PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}")
endfunction()

set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)

# edge_add_fuzzer(NAME SOURCES... DEPS... CORPUS dir) — a libFuzzer target when the compiler
# is clang; with gcc the same LLVMFuzzerTestOneInput is linked with tests/fuzz/replay_main.cc,
# which replays the corpus folder (and any files given) so every fuzz target runs in ctest.
function(edge_add_fuzzer name)
  cmake_parse_arguments(ARG "" "CORPUS" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE edge_build_flags ${ARG_DEPS})
  # For scripts/fuzz.sh: each target and its corpus (written to <build>/fuzz_targets.txt).
  set_property(GLOBAL APPEND PROPERTY EDGE_FUZZ_TARGETS "${name} ${ARG_CORPUS}")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    if(ARG_CORPUS)
      add_test(NAME ${name}_smoke COMMAND ${name} -runs=2000 ${ARG_CORPUS})
    endif()
  else()
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.cc)
    if(ARG_CORPUS)
      add_test(NAME ${name}_replay COMMAND ${name} ${ARG_CORPUS})
    endif()
  endif()
endfunction()
