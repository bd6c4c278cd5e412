// driver_reload [N=2] [S=1M]
// The driver loaded, used, released and unloaded, then loaded again: a plugin
// host or a Python process that imports, drops and re-imports a CUDA library.
// Each of two passes does dlopen("libcuda.so.1") and resolves everything
// anew, cuInit, retains and sets the primary context of device 0, makes N
// pageable round trips of S bytes (every byte checked), frees, releases the
// primary context (its last reference: the driver resets it, freeing every
// allocation and pinned buffer made in it) and dlclose()s the library.
// Pass 1 resolves every function with dlsym (nothing but the app holds the
// library, so dlclose may really unload it); pass 2 fetches cuMemcpyHtoD through
// cuGetProcAddress_v2 (as driver_dlsym does), the rest with dlsym. A tracer must
// neither call a function of the unloaded library nor lose or double a copy,
// and the pinned rewrite must not use pinned memory the reset freed.
// Prints whether dlclose unloaded the library (informational: a preloaded
// tracer may keep it loaded).
//
// Exact traffic (names are the exported symbols the app ends up calling):
//   cuMemAlloc_v2                           2 calls   2*S bytes  (device, one per pass)
//   cuMemcpyHtoD_v2   H2D pageable -> device 2N calls  2N*S bytes (pass 1 dlsym, pass 2 cuGetProcAddress)
//   cuMemcpyDtoH_v2   D2H device -> pageable 2N calls  2N*S bytes (dlsym)
#include <dlfcn.h>

#include <vector>

#include "driver_common.h"

namespace {

template <typename F>
F need(void* h, const char* name) {
  return driver_need<F>("driver_reload", h, name);
}

// One load of the driver, start to finish. Returns false if a byte was wrong.
bool pass(int which, size_t n, size_t s) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (which == 1) {
      std::printf("driver_reload: no GPU (cannot load libcuda.so.1: %s): skipping\n", dlerror());
      std::exit(testapp::kSkip);
    }
    std::fprintf(stderr, "driver_reload: dlopen after dlclose failed: %s\n", dlerror());
    std::exit(1);
  }
  auto init = need<decltype(&cuInit)>(h, "cuInit");
  auto device_get = need<decltype(&cuDeviceGet)>(h, "cuDeviceGet");
  auto retain = need<decltype(&cuDevicePrimaryCtxRetain)>(h, "cuDevicePrimaryCtxRetain");
  auto release = need<decltype(&cuDevicePrimaryCtxRelease_v2)>(h, "cuDevicePrimaryCtxRelease_v2");
  auto set_current = need<decltype(&cuCtxSetCurrent)>(h, "cuCtxSetCurrent");
  auto mem_alloc = need<decltype(&cuMemAlloc_v2)>(h, "cuMemAlloc_v2");
  auto mem_free = need<decltype(&cuMemFree_v2)>(h, "cuMemFree_v2");
  auto dtoh = need<decltype(&cuMemcpyDtoH_v2)>(h, "cuMemcpyDtoH_v2");
  decltype(&cuMemcpyHtoD_v2) htod = nullptr;
  if (which == 1) {
    htod = need<decltype(&cuMemcpyHtoD_v2)>(h, "cuMemcpyHtoD_v2");
  } else {
    auto get_proc = need<decltype(&cuGetProcAddress_v2)>(h, "cuGetProcAddress_v2");
    void* p = nullptr;
    CUdriverProcAddressQueryResult status{};
    DA_CHECK(get_proc("cuMemcpyHtoD", &p, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
    TA_ASSERT(p && status == CU_GET_PROC_ADDRESS_SUCCESS);
    htod = reinterpret_cast<decltype(&cuMemcpyHtoD_v2)>(p);
  }

  if (which == 1) driver_require_gpu("driver_reload", init(0));
  else DA_CHECK(init(0));
  CUdevice dev = 0;
  DA_CHECK(device_get(&dev, 0));
  CUcontext ctx = nullptr;
  DA_CHECK(retain(&ctx, dev));
  DA_CHECK(set_current(ctx));

  CUdeviceptr d = 0;
  DA_CHECK(mem_alloc(&d, s));
  std::vector<unsigned char> src(s), dst(s);
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    const auto seed = static_cast<uint32_t>(which * 1000 + i);
    testapp::fill(src.data(), s, seed);
    std::fill(dst.begin(), dst.end(), 0);
    DA_CHECK(htod(d, src.data(), s));
    DA_CHECK(dtoh(dst.data(), d, s));
    ok = testapp::matches(dst.data(), s, seed) && ok;
  }
  DA_CHECK(mem_free(d));
  DA_CHECK(set_current(nullptr));
  DA_CHECK(release(dev));  // the last reference: the driver resets the primary context

  if (dlclose(h) != 0) {
    std::fprintf(stderr, "driver_reload: dlclose failed: %s\n", dlerror());
    std::exit(1);
  }
  void* still = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  std::printf("driver_reload: pass %d done; libcuda %s after dlclose\n", which,
              still ? "still loaded" : "unloaded");
  if (still) dlclose(still);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 2);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  bool ok = pass(1, n, s);
  ok = pass(2, n, s) && ok;
  TA_ASSERT(ok);
  testapp::done("driver_reload");
  return 0;
}
