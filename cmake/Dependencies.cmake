# Every third-party dependency, found in one place. README.md says what each is for.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

# CUDA headers only: the shim and the test doubles compile against the real
# cuda.h / cuda_runtime_api.h / cupti*.h but never link libcuda or libcudart.
find_package(CUDAToolkit REQUIRED)
find_path(CUPTI_INCLUDE_DIR cupti.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_TARGET_DIR}/extras/CUPTI/include
        /usr/local/cuda/extras/CUPTI/include)
if(NOT CUPTI_INCLUDE_DIR)
  message(FATAL_ERROR "cupti.h not found (install the CUDA toolkit with CUPTI)")
endif()
add_library(cuxfer_cuda_headers INTERFACE)
target_include_directories(cuxfer_cuda_headers SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS} ${CUPTI_INCLUDE_DIR})

# Logging and formatting. The shim uses both header-only so that it carries no
# shared-library dependency that could clash with an app's own spdlog/fmt.
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
get_target_property(_fmt_inc fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
get_target_property(_spdlog_inc spdlog::spdlog INTERFACE_INCLUDE_DIRECTORIES)
add_library(cuxfer_log_headeronly INTERFACE)
target_include_directories(cuxfer_log_headeronly SYSTEM INTERFACE ${_spdlog_inc} ${_fmt_inc})
target_compile_definitions(cuxfer_log_headeronly INTERFACE
  SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL FMT_HEADER_ONLY SPDLOG_NO_EXCEPTIONS)

# Trace block compression.
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)

# Offline symbolization in the analyzer (elfutils). Optional: without it the
# report names call sites by module+offset and says why.
pkg_check_modules(LIBDW IMPORTED_TARGET libdw)

# `cuxfer export --sqlite` (analyzer/render/sqlite_writer): Debian's
# libsqlite3-dev, found with CMake's own FindSQLite3 (SQLite::SQLite3).
find_package(SQLite3)
if(NOT SQLite3_FOUND)
  message(FATAL_ERROR "SQLite3 not found: install libsqlite3-dev (bash scripts/install-deps.sh)")
endif()

# JSON: reports, machine profiles, policy files (the shim reads policies too).
# Debian's nlohmann-json3-dev, header-only; nothing of it is vendored.
find_package(nlohmann_json 3.10 CONFIG)
if(NOT nlohmann_json_FOUND)
  message(FATAL_ERROR "nlohmann_json (>= 3.10) not found: install nlohmann-json3-dev (bash scripts/install-deps.sh)")
endif()

if(CUXFER_BUILD_TESTS)
  find_package(GTest REQUIRED)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
endif()

# nvcc for the GPU tier.
set(CUXFER_HAVE_NVCC OFF)
if(NOT CUXFER_GPU_TESTS STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CUXFER_HAVE_NVCC ON)
  elseif(CUXFER_GPU_TESTS STREQUAL "ON")
    message(FATAL_ERROR "CUXFER_GPU_TESTS=ON but no nvcc found")
  endif()
endif()
