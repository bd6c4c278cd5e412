# The build's identity (version, commit, date) as a header,
# <cuxfer/build_info.h>, for `cuxfer --version`, the shim's build stamp and
# the launcher's check that the two come from one build. Targets that include
# it link cuxfer_build_info.
set(CUXFER_BUILD_INFO_DIR ${CMAKE_BINARY_DIR}/generated)
set(_build_info_args -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DVERSION=${PROJECT_VERSION}
    -DOUT=${CUXFER_BUILD_INFO_DIR}/cuxfer/build_info.h -P ${PROJECT_SOURCE_DIR}/cmake/write_build_info.cmake)
execute_process(COMMAND ${CMAKE_COMMAND} ${_build_info_args})
add_custom_target(cuxfer_build_stamp
  COMMAND ${CMAKE_COMMAND} ${_build_info_args}
  BYPRODUCTS ${CUXFER_BUILD_INFO_DIR}/cuxfer/build_info.h
  COMMENT "build identity (version, commit, date)" VERBATIM)
add_library(cuxfer_build_info INTERFACE)
target_include_directories(cuxfer_build_info INTERFACE ${CUXFER_BUILD_INFO_DIR})
add_dependencies(cuxfer_build_info cuxfer_build_stamp)
