// Helpers for the driver-API test apps (cuda.h, no runtime).
#pragma once

#include <cuda.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "common.h"  // fill/matches/arg_size/TA_ASSERT; the runtime itself is not used

#define DA_CHECK(call)                                                                          \
  do {                                                                                          \
    CUresult r_ = (call);                                                                       \
    if (r_ != CUDA_SUCCESS) {                                                                   \
      std::fprintf(stderr, "%s:%d: %s returned CUresult %d\n", __FILE__, __LINE__, #call,      \
                   static_cast<int>(r_));                                                       \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

// cuInit's failure with no GPU/driver: print "no GPU" and skip (exit 77).
inline void driver_require_gpu(const char* app, CUresult init_result) {
  if (init_result != CUDA_SUCCESS) {
    std::printf("%s: no GPU (cuInit returned %d): skipping\n", app, static_cast<int>(init_result));
    std::fflush(stdout);
    std::exit(testapp::kSkip);
  }
}

// dlsym(h, name) as F, or exit 1 naming the symbol (apps that find the
// driver through its handle, as JAX and CuPy do).
template <typename F>
F driver_need(const char* app, void* h, const char* name) {
  void* p = dlsym(h, name);
  if (!p) {
    std::fprintf(stderr, "%s: dlsym(%s) failed: %s\n", app, name, dlerror());
    std::exit(1);
  }
  return reinterpret_cast<F>(p);
}
