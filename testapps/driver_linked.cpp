// driver_linked [N=4] [S=1M]
// Driver API through the PLT (linked against libcuda): cuInit, primary
// context, cuMemAlloc, sync copies from pageable memory, async copies from a
// cuMemHostAlloc'd buffer on a created stream, one device-to-device copy.
//
// Exact traffic (names are the exported symbols cuda.h maps the calls to):
//   cuMemAlloc_v2                                   2 calls  2*S bytes (device)
//   cuMemHostAlloc                                  1 call   S bytes   (host_pinned)
//   cuMemcpyHtoD_v2       H2D pageable -> device    N calls  N*S bytes
//   cuMemcpyDtoH_v2       D2H device -> pageable    N+1 calls (N+1)*S bytes (the last checks the D2D copy)
//   cuMemcpyHtoDAsync_v2  H2D pinned -> device      N calls  N*S bytes
//   cuMemcpyDtoHAsync_v2  D2H device -> pinned      N calls  N*S bytes
//   cuMemcpyDtoD_v2       D2D device -> device      1 call   S bytes
#include <vector>

#include "driver_common.h"

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 4);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  driver_require_gpu("driver_linked", cuInit(0));
  CUdevice dev = 0;
  DA_CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  DA_CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  DA_CHECK(cuCtxSetCurrent(ctx));
  CUdeviceptr d = 0, d2 = 0;
  DA_CHECK(cuMemAlloc(&d, s));
  DA_CHECK(cuMemAlloc(&d2, s));
  std::vector<unsigned char> src(s), dst(s);
  for (size_t i = 0; i < n; ++i) {
    testapp::fill(src.data(), s, static_cast<uint32_t>(i));
    std::memset(dst.data(), 0, s);
    DA_CHECK(cuMemcpyHtoD(d, src.data(), s));
    DA_CHECK(cuMemcpyDtoH(dst.data(), d, s));
    TA_ASSERT(testapp::matches(dst.data(), s, static_cast<uint32_t>(i)));
  }
  void* pin = nullptr;
  DA_CHECK(cuMemHostAlloc(&pin, s, 0));
  CUstream st = nullptr;
  DA_CHECK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
  for (size_t i = 0; i < n; ++i) {
    const auto seed = static_cast<uint32_t>(500 + i);
    testapp::fill(pin, s, seed);
    DA_CHECK(cuMemcpyHtoDAsync(d, pin, s, st));
    DA_CHECK(cuStreamSynchronize(st));
    std::memset(pin, 0, s);
    DA_CHECK(cuMemcpyDtoHAsync(pin, d, s, st));
    DA_CHECK(cuStreamSynchronize(st));
    TA_ASSERT(testapp::matches(pin, s, seed));
  }
  DA_CHECK(cuMemcpyDtoD(d2, d, s));
  std::memset(dst.data(), 0, s);
  DA_CHECK(cuMemcpyDtoH(dst.data(), d2, s));  // check the D2D copy
  TA_ASSERT(testapp::matches(dst.data(), s, static_cast<uint32_t>(500 + n - 1)));
  DA_CHECK(cuStreamDestroy(st));
  DA_CHECK(cuMemFreeHost(pin));
  DA_CHECK(cuMemFree(d2));
  DA_CHECK(cuMemFree(d));
  DA_CHECK(cuDevicePrimaryCtxRelease(dev));
  testapp::done("driver_linked");
  return 0;
}
