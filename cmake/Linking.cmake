# How the product's binaries link, so that they run on machines other than the
# build machine (docs/install.md).
#
# The shim (libcuxfer.so) is preloaded into programs cuxfer did not build: it
# must load nothing the program did not load itself. It always carries its own
# libstdc++ and zstd (static, hidden behind its version script), so that an
# older system libstdc++ cannot refuse it and an app's own libzstd cannot
# clash with it; its `ldd` is libc, libgcc_s and the loader. Sanitizer builds
# keep the shared libraries the sanitizer runtimes expect.
#
# CUXFER_PORTABLE (wheels, tarballs: scripts/build-wheel.sh) links the command
# and cuxfer-calibrate the same way, with fmt header-only and libdw, libelf,
# SQLite and their compression libraries from their static archives: nothing
# outside glibc and libgcc_s is needed at run time. Off, they use the
# system's shared libraries, as a distribution package (.deb) should.
#
# CUXFER_SPLIT_DEBUG strips the product's binaries after linking and keeps
# their debug info in <file>.debug beside them (GNU debuglink), installed
# only with the `debug` component, so that the shipped files are small and a
# crash or a cuxfer frame can still be symbolized with the debug archive.
option(CUXFER_PORTABLE "Link the command and cuxfer-calibrate against nothing but glibc and libgcc_s" OFF)
option(CUXFER_SPLIT_DEBUG "Strip the product's binaries, debug info into <file>.debug (install component debug)" OFF)

set(CUXFER_STATIC_RUNTIME ON)
if(CUXFER_SANITIZE)
  set(CUXFER_STATIC_RUNTIME OFF)
endif()

# static_archive(VAR NAME): the full path of lib<NAME>.a, or a fatal error
# naming the Debian package that has it.
function(cuxfer_static_archive var name package)
  find_library(${var} NAMES lib${name}.a)
  if(NOT ${var})
    message(FATAL_ERROR "lib${name}.a not found: a portable build links it statically (install ${package})")
  endif()
endfunction()

# zstd for the trace format: the archive for the shim (and, portable, the command).
add_library(cuxfer_zstd_static INTERFACE)
if(CUXFER_STATIC_RUNTIME)
  cuxfer_static_archive(CUXFER_ZSTD_ARCHIVE zstd libzstd-dev)
  target_link_libraries(cuxfer_zstd_static INTERFACE ${CUXFER_ZSTD_ARCHIVE})
  target_include_directories(cuxfer_zstd_static SYSTEM INTERFACE ${ZSTD_INCLUDE_DIRS})
else()
  target_link_libraries(cuxfer_zstd_static INTERFACE PkgConfig::ZSTD)
endif()
add_library(cuxfer_zstd INTERFACE)
target_link_libraries(cuxfer_zstd INTERFACE $<IF:$<BOOL:${CUXFER_PORTABLE}>,cuxfer_zstd_static,PkgConfig::ZSTD>)

# fmt for the analyzer: header-only when portable (Debian ships no libfmt.a).
add_library(cuxfer_fmt INTERFACE)
if(CUXFER_PORTABLE)
  target_link_libraries(cuxfer_fmt INTERFACE fmt::fmt-header-only)
else()
  target_link_libraries(cuxfer_fmt INTERFACE fmt::fmt)
endif()

# SQLite for `cuxfer export --sqlite`.
add_library(cuxfer_sqlite INTERFACE)
if(CUXFER_PORTABLE)
  cuxfer_static_archive(CUXFER_SQLITE_ARCHIVE sqlite3 libsqlite3-dev)
  target_link_libraries(cuxfer_sqlite INTERFACE ${CUXFER_SQLITE_ARCHIVE} m ${CMAKE_DL_LIBS} Threads::Threads)
  target_include_directories(cuxfer_sqlite SYSTEM INTERFACE ${SQLite3_INCLUDE_DIRS})
else()
  target_link_libraries(cuxfer_sqlite INTERFACE SQLite::SQLite3)
endif()

# libdw for offline symbolization, with what its archive needs (elfutils
# built with zlib, lzma and bzip2 decompression of debug sections).
if(TARGET PkgConfig::LIBDW)
  add_library(cuxfer_libdw INTERFACE)
  if(CUXFER_PORTABLE)
    cuxfer_static_archive(CUXFER_DW_ARCHIVE dw libdw-dev)
    cuxfer_static_archive(CUXFER_ELF_ARCHIVE elf libelf-dev)
    cuxfer_static_archive(CUXFER_Z_ARCHIVE z zlib1g-dev)
    cuxfer_static_archive(CUXFER_LZMA_ARCHIVE lzma liblzma-dev)
    cuxfer_static_archive(CUXFER_BZ2_ARCHIVE bz2 libbz2-dev)
    target_link_libraries(cuxfer_libdw INTERFACE ${CUXFER_DW_ARCHIVE} ${CUXFER_ELF_ARCHIVE} ${CUXFER_Z_ARCHIVE}
                          ${CUXFER_LZMA_ARCHIVE} ${CUXFER_BZ2_ARCHIVE} cuxfer_zstd_static ${CMAKE_DL_LIBS} Threads::Threads)
    target_include_directories(cuxfer_libdw SYSTEM INTERFACE ${LIBDW_INCLUDE_DIRS})
  else()
    target_link_libraries(cuxfer_libdw INTERFACE PkgConfig::LIBDW)
  endif()
endif()

# cuxfer_static_cxx_runtime(TARGET): libstdc++ inside TARGET, its symbols
# local; unused sections dropped.
function(cuxfer_static_cxx_runtime target)
  target_link_options(${target} PRIVATE -static-libstdc++ -Wl,--exclude-libs,ALL -Wl,--gc-sections)
endfunction()

# cuxfer_portable_program(TARGET): an executable of the product.
function(cuxfer_portable_program target)
  if(CUXFER_PORTABLE AND CUXFER_STATIC_RUNTIME)
    cuxfer_static_cxx_runtime(${target})
    # libstdc++.a as built against a newer glibc refers to arc4random
    # (GLIBC_2.36) from std::random_device, which cuxfer never uses; a local
    # definition keeps the program's glibc floor where its own code puts it.
    target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/glibc_floor.c)
  endif()
  cuxfer_split_debug(${target})
endfunction()

# cuxfer_split_debug(TARGET): see CUXFER_SPLIT_DEBUG above.
function(cuxfer_split_debug target)
  if(NOT CUXFER_SPLIT_DEBUG)
    return()
  endif()
  if(NOT CMAKE_OBJCOPY)
    message(FATAL_ERROR "CUXFER_SPLIT_DEBUG needs objcopy (binutils)")
  endif()
  set(f $<TARGET_FILE:${target}>)
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_OBJCOPY} --only-keep-debug ${f} ${f}.debug
    COMMAND ${CMAKE_OBJCOPY} --strip-all ${f}
    COMMAND ${CMAKE_COMMAND} -E chdir $<TARGET_FILE_DIR:${target}> ${CMAKE_OBJCOPY}
            --add-gnu-debuglink=$<TARGET_FILE_NAME:${target}>.debug $<TARGET_FILE_NAME:${target}>
    VERBATIM)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set(dest ${CMAKE_INSTALL_BINDIR})
  else()
    set(dest ${CMAKE_INSTALL_LIBDIR})
  endif()
  install(FILES ${f}.debug DESTINATION ${dest} COMPONENT debug EXCLUDE_FROM_ALL)
endfunction()
