# EDGE_STATIC_GRPC: link gRPC, protobuf, Abseil, upb, RE2 and c-ares from their static
# archives (Debian ships both kinds beside each other) instead of ~55 shared libraries.
# Why: every start of a binary pays the dynamic loader for those libraries — symbol lookups
# and relocations, measured with LD_DEBUG=statistics at ~19 M cycles for a program that only
# links grpc++ — which is most of the operator CLI's start-up (issue 14: `edge-controller
# nodes`). Static archives resolve all of that at link time.
#
# How: every imported library target of those packages whose location is a .so with a .a
# beside it is pointed at the .a. The switch is global (a target that linked the shared
# library and one that linked the archive would carry two copies of gRPC's and protobuf's
# globals), so it applies to every binary of the build; links take longer and binaries grow.
function(edge_prefer_static_grpc)
  get_directory_property(_targets IMPORTED_TARGETS)
  set(_switched 0)
  foreach(t IN LISTS _targets)
    get_target_property(_type ${t} TYPE)
    if(NOT _type MATCHES "^(SHARED|UNKNOWN)_LIBRARY$")
      continue()
    endif()
    foreach(prop IMPORTED_LOCATION IMPORTED_LOCATION_NONE IMPORTED_LOCATION_RELEASE
                 IMPORTED_LOCATION_RELWITHDEBINFO IMPORTED_LOCATION_DEBUG IMPORTED_LOCATION_NOCONFIG)
      get_target_property(_loc ${t} ${prop})
      if(NOT _loc OR NOT _loc MATCHES "/lib(grpc|gpr|absl_|protobuf|upb|re2|cares|address_sorting)[^/]*\\.so")
        continue()
      endif()
      string(REGEX REPLACE "\\.so(\\.[0-9.]+)?$" ".a" _archive "${_loc}")
      if(EXISTS "${_archive}")
        set_target_properties(${t} PROPERTIES ${prop} "${_archive}" IMPORTED_SONAME "")
        math(EXPR _switched "${_switched} + 1")
      endif()
    endforeach()
  endforeach()
  message(STATUS "EDGE_STATIC_GRPC: ${_switched} imported libraries linked from static archives")
endfunction()
edge_prefer_static_grpc()
