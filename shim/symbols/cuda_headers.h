// CUDA headers as the driver's own sources see them: every versioned,
// per-thread-stream and legacy entry point declared under its exported name,
// none renamed by macros. Hooks define those exact names.
#pragma once
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>
