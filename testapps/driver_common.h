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

// cuInit's failure with no GPU, or a driver that cannot run one: print "no
// GPU" and skip (exit 77). Any other failure is a failure (exit 1): the
// shim's hooks answer CUDA_ERROR_NOT_INITIALIZED where they cannot reach the
// driver, and that must never pass as a skip.
inline void driver_require_gpu(const char* app, CUresult init_result) {
  if (init_result == CUDA_SUCCESS) return;
  const bool no_gpu = init_result == CUDA_ERROR_NO_DEVICE || init_result == CUDA_ERROR_DEVICE_UNAVAILABLE ||
                      init_result == CUDA_ERROR_SYSTEM_DRIVER_MISMATCH ||
                      init_result == CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE ||
                      init_result == CUDA_ERROR_SYSTEM_NOT_READY;
  std::printf("%s: %s (cuInit returned %d)%s\n", app, no_gpu ? "no GPU" : "cuInit failed",
              static_cast<int>(init_result), no_gpu ? ": skipping" : "");
  std::fflush(stdout);
  std::exit(no_gpu ? testapp::kSkip : 1);
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

// A green context with every SM of `dev` (cuGreenCtxCreate), converted
// (cuCtxFromGreenCtx) and pushed current. A device or driver without green
// contexts: skip (exit 77), saying so.
inline CUcontext driver_make_green(const char* app, CUdevice dev, CUgreenCtx& green) {
  CUdevResource sms{};
  const CUresult r = cuDeviceGetDevResource(dev, &sms, CU_DEV_RESOURCE_TYPE_SM);
  if (r == CUDA_ERROR_NOT_SUPPORTED) {
    std::printf("%s: this device has no green contexts: skipped\n", app);
    std::fflush(stdout);
    std::exit(testapp::kSkip);
  }
  DA_CHECK(r);
  CUdevResourceDesc desc = nullptr;
  DA_CHECK(cuDevResourceGenerateDesc(&desc, &sms, 1));
  DA_CHECK(cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
  CUcontext ctx = nullptr;
  DA_CHECK(cuCtxFromGreenCtx(&ctx, green));
  DA_CHECK(cuCtxPushCurrent(ctx));
  return ctx;
}
