# What `cmake --install` lays out, and the .deb CPack makes of it.
#
#   bin/cuxfer, bin/cuxfer-calibrate           (analyzer/, calibrate/)
#   <libdir>/libcuxfer.so, libcuxfer_memhooks.so (shim/)
#   share/doc/cuxfer/{README,CHANGELOG}.md, share/doc/cuxfer/docs/ (the user docs, here)
#
# The targets install themselves; this file adds the documentation and the
# package. `cuxfer record` finds the shim at <bin>/../lib or <bin>/../<libdir>
# (analyzer/launcher/record_command.cpp), `cuxfer calibrate` its program next
# to itself, so any prefix works. Nothing built for tests (tests/simcuda, the
# test apps, the test binaries, cuxfer-calibrate-sim) or benchmarks is
# installed.
include(GNUInstallDirs)

install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc)
# Only what users read is installed: the commands, the report, installing, the
# figures. What developers read (building and testing, the architecture and its
# rationale, the simulated CUDA, the test apps, the GPU runs) stays in the
# repository, as the dated logs of measurements in docs/results/ do. Every page
# of docs/ is one or the other: a new page must be named in one of these lists.
set(CUXFER_USER_DOCS guide cli report install calibrate check policy tune sqlite trace-format benchmarks)
set(CUXFER_DEVELOPER_DOCS building architecture design-notes simcuda testapps gpu-validation gpu-external)
file(GLOB _cuxfer_docs CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/docs ${PROJECT_SOURCE_DIR}/docs/*.md)
foreach(_doc IN LISTS _cuxfer_docs)
  string(REGEX REPLACE "\\.md$" "" _doc ${_doc})
  if(NOT _doc IN_LIST CUXFER_USER_DOCS AND NOT _doc IN_LIST CUXFER_DEVELOPER_DOCS)
    message(FATAL_ERROR "docs/${_doc}.md is in neither CUXFER_USER_DOCS (installed) nor "
                        "CUXFER_DEVELOPER_DOCS (not installed) in cmake/Packaging.cmake: name it in one")
  endif()
endforeach()
list(TRANSFORM CUXFER_USER_DOCS REPLACE "(.+)" "${PROJECT_SOURCE_DIR}/docs/\\1.md" OUTPUT_VARIABLE _cuxfer_user_doc_files)
install(FILES ${_cuxfer_user_doc_files} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT doc)
if(EXISTS ${PROJECT_SOURCE_DIR}/LICENSE)
  install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT doc)
endif()

# The .deb: `cmake --build build --target package` (or `cpack -G DEB` in the
# build directory) writes cuxfer_<version>_<arch>.deb, installing under /usr.
# The libraries go to /usr/<libdir> as configured (lib with the default
# prefix, lib/<multiarch> when configured with -DCMAKE_INSTALL_PREFIX=/usr);
# the launcher was compiled with the same libdir, so it finds them either way.
set(CUXFER_PACKAGE_MAINTAINER "cuxfer maintainers <cuxfer-maintainers@invalid>"
    CACHE STRING "Maintainer field of the .deb (name <email>)")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME cuxfer)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${CUXFER_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "finds slow host-device transfers in CUDA programs")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "cuxfer records every host<->device copy a CUDA program makes (size, direction,\n"
    "kind of host memory, time, call stack) through a preloaded library,\n"
    "libcuxfer.so, and turns the recording into a report of where pageable and\n"
    "synchronous copies cost time. It can also run pageable copies through pinned\n"
    "memory (cuxfer record --rewrite=pin) and apply per-site policies.\n"
    "The CUDA driver and CUPTI are loaded at run time from the machine's driver\n"
    "and toolkit installation; the package depends on no CUDA package.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # cuxfer_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# libunwind is dlopened by the shim for fast call stacks (glibc's backtrace
# otherwise); nothing of CUDA is linked: the shim and calibrate's static
# cudart reach libcuda/libcupti through dlopen.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS libunwind8)
find_program(CUXFER_DPKG_SHLIBDEPS dpkg-shlibdeps)
mark_as_advanced(CUXFER_DPKG_SHLIBDEPS)
if(CUXFER_DPKG_SHLIBDEPS)
  # Depends from the ELF files' NEEDED entries (libc6, libstdc++6, libzstd1,
  # libfmt9, libsqlite3-0, libdw1 on Debian 12).
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  # What the binaries link on Debian 12 (ldd); names differ on other releases.
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6, libstdc++6, libgcc-s1, libzstd1, libfmt9, libsqlite3-0")
  if(TARGET PkgConfig::LIBDW)
    string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS ", libdw1")
  endif()
endif()

include(CPack)
