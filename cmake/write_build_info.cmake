# Writes the build's identity into a header: run at configure time and before
# every build (cmake/BuildInfo.cmake), so that the commit follows the checkout.
# configure_file rewrites the header only when its text changes, so an
# unchanged commit recompiles nothing.
#
# In: SOURCE_DIR, OUT, VERSION. The commit comes from git when SOURCE_DIR is
# a checkout, else from the environment's CUXFER_GIT_COMMIT (a build from a
# source archive), else "unknown". The date honours SOURCE_DATE_EPOCH.
set(commit "")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    set(commit "")
  endif()
endif()
if(commit STREQUAL "" AND DEFINED ENV{CUXFER_GIT_COMMIT})
  set(commit "$ENV{CUXFER_GIT_COMMIT}")
endif()
if(commit STREQUAL "")
  set(commit "unknown")
endif()
string(TIMESTAMP date "%Y-%m-%d" UTC)
set(CUXFER_BUILD_VERSION "${VERSION}")
set(CUXFER_BUILD_COMMIT "${commit}")
set(CUXFER_BUILD_DATE "${date}")
configure_file("${CMAKE_CURRENT_LIST_DIR}/build_info.h.in" "${OUT}" @ONLY)
