// driver_dlsym [N=4] [S=1M]
// Reaches the driver the way JAX/XLA and CuPy do: dlopen("libcuda.so.1") and
// dlsym of the exported _v2 names, plus entry points fetched through
// cuGetProcAddress_v2 (one legacy, one per-thread-default-stream).
//
// Exact traffic (names are the exported symbols the app ends up calling):
//   cuMemAlloc_v2                 (dlsym)           1 call   S bytes   (device)
//   cuMemHostAlloc                (dlsym)           1 call   S bytes   (host_pinned)
//   cuMemcpyHtoDAsync_v2          (dlsym)  H2D pinned -> device     N calls  N*S bytes
//   cuMemcpyDtoHAsync_v2          (dlsym)  D2H device -> pinned     N calls  N*S bytes
//   cuMemcpyHtoD_v2      (cuGetProcAddress "cuMemcpyHtoD", 13000, DEFAULT)
//                                          H2D pageable -> device   N calls  N*S bytes
//   cuMemcpyDtoH_v2               (dlsym)  D2H device -> pageable   N calls  N*S bytes
//   cuMemcpyDtoH_v2_ptds (cuGetProcAddress "cuMemcpyDtoH", 13000, PER_THREAD_DEFAULT_STREAM)
//                                          D2H device -> pageable   1 call   S bytes
#include <dlfcn.h>

#include <vector>

#include "driver_common.h"

namespace {

template <typename F>
F need(void* h, const char* name) {
  return driver_need<F>("driver_dlsym", h, name);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 4);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::printf("driver_dlsym: no GPU (cannot load libcuda.so.1: %s): skipping\n", dlerror());
    return testapp::kSkip;
  }
  auto init = need<decltype(&cuInit)>(h, "cuInit");
  auto device_get = need<decltype(&cuDeviceGet)>(h, "cuDeviceGet");
  auto retain = need<decltype(&cuDevicePrimaryCtxRetain)>(h, "cuDevicePrimaryCtxRetain");
  auto release = need<decltype(&cuDevicePrimaryCtxRelease_v2)>(h, "cuDevicePrimaryCtxRelease_v2");
  auto set_current = need<decltype(&cuCtxSetCurrent)>(h, "cuCtxSetCurrent");
  auto mem_alloc = need<decltype(&cuMemAlloc_v2)>(h, "cuMemAlloc_v2");
  auto mem_free = need<decltype(&cuMemFree_v2)>(h, "cuMemFree_v2");
  auto host_alloc = need<decltype(&cuMemHostAlloc)>(h, "cuMemHostAlloc");
  auto free_host = need<decltype(&cuMemFreeHost)>(h, "cuMemFreeHost");
  auto stream_create = need<decltype(&cuStreamCreate)>(h, "cuStreamCreate");
  auto stream_sync = need<decltype(&cuStreamSynchronize)>(h, "cuStreamSynchronize");
  auto stream_destroy = need<decltype(&cuStreamDestroy_v2)>(h, "cuStreamDestroy_v2");
  auto htod_async = need<decltype(&cuMemcpyHtoDAsync_v2)>(h, "cuMemcpyHtoDAsync_v2");
  auto dtoh_async = need<decltype(&cuMemcpyDtoHAsync_v2)>(h, "cuMemcpyDtoHAsync_v2");
  auto dtoh = need<decltype(&cuMemcpyDtoH_v2)>(h, "cuMemcpyDtoH_v2");
  auto get_proc = need<decltype(&cuGetProcAddress_v2)>(h, "cuGetProcAddress_v2");
  auto ptr_attrs = need<decltype(&cuPointerGetAttributes)>(h, "cuPointerGetAttributes");

  driver_require_gpu("driver_dlsym", init(0));
  CUdevice dev = 0;
  DA_CHECK(device_get(&dev, 0));
  CUcontext ctx = nullptr;
  DA_CHECK(retain(&ctx, dev));
  DA_CHECK(set_current(ctx));

  void* p = nullptr;
  CUdriverProcAddressQueryResult status{};
  DA_CHECK(get_proc("cuMemcpyHtoD", &p, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  TA_ASSERT(p && status == CU_GET_PROC_ADDRESS_SUCCESS);
  auto htod = reinterpret_cast<decltype(&cuMemcpyHtoD_v2)>(p);
  DA_CHECK(get_proc("cuMemcpyDtoH", &p, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status));
  TA_ASSERT(p);
  auto dtoh_ptds = reinterpret_cast<decltype(&cuMemcpyDtoH_v2)>(p);

  CUdeviceptr d = 0;
  DA_CHECK(mem_alloc(&d, s));
  void* pin = nullptr;
  DA_CHECK(host_alloc(&pin, s, CU_MEMHOSTALLOC_PORTABLE));
  {  // what XLA asks before choosing a copy path
    unsigned type = 0;
    CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    void* v[] = {&type};
    DA_CHECK(ptr_attrs(1, a, v, reinterpret_cast<CUdeviceptr>(pin)));
    TA_ASSERT(type == CU_MEMORYTYPE_HOST);
    DA_CHECK(ptr_attrs(1, a, v, d));
    TA_ASSERT(type == CU_MEMORYTYPE_DEVICE);
  }
  CUstream st = nullptr;
  DA_CHECK(stream_create(&st, CU_STREAM_NON_BLOCKING));
  std::vector<unsigned char> src(s), dst(s);
  for (size_t i = 0; i < n; ++i) {
    const auto seed = static_cast<uint32_t>(i);
    testapp::fill(pin, s, seed);
    DA_CHECK(htod_async(d, pin, s, st));
    DA_CHECK(stream_sync(st));
    std::memset(pin, 0, s);
    DA_CHECK(dtoh_async(pin, d, s, st));
    DA_CHECK(stream_sync(st));
    TA_ASSERT(testapp::matches(pin, s, seed));

    testapp::fill(src.data(), s, seed + 1000);
    std::memset(dst.data(), 0, s);
    DA_CHECK(htod(d, src.data(), s));
    DA_CHECK(dtoh(dst.data(), d, s));
    TA_ASSERT(testapp::matches(dst.data(), s, seed + 1000));
  }
  std::memset(dst.data(), 0, s);
  DA_CHECK(dtoh_ptds(dst.data(), d, s));
  TA_ASSERT(testapp::matches(dst.data(), s, static_cast<uint32_t>(n - 1 + 1000)));

  DA_CHECK(stream_destroy(st));
  DA_CHECK(free_host(pin));
  DA_CHECK(mem_free(d));
  DA_CHECK(release(dev));
  testapp::done("driver_dlsym");
  return 0;
}
