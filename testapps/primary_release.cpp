// primary_release [ROUNDS=2] [S=16M]
// What PyCUDA's test_additional_primary_context does, under a context of the
// app's own: the device's primary context is retained, pushed, used, popped
// and released -- its last reference, so the driver destroys it -- while the
// app's own context (cuCtxCreate) lives on and keeps copying. Under
// --rewrite=pin the shim made a staging pool and registrations in both: the
// ones of the primary context die with it, and the shim must never bind its
// handle again (the real driver reads freed memory there: a segfault on an
// H100 with driver 580, the simulated driver aborts).
//
// Per round: in the primary context, cuMemAlloc S, twice H2D then D2H of S
// bytes from one reused pageable buffer (sync, checked), a second reference
// retained and released (not the last), the same copies again, cuMemFree,
// pop, release (the last); then the same copies in the app's context with a
// fresh buffer. At the
// end the app's context is destroyed and the last host buffer freed with no
// context current.
//
// Exact traffic, per round:
//   cuMemcpyHtoD_v2  H2D pageable -> device   6 calls  6*S bytes
//   cuMemcpyDtoH_v2  D2H device -> pageable   6 calls  6*S bytes
// Prints "primary_release: <n> rounds OK".
#include <vector>

#include "driver_common.h"

namespace {
void copy_twice(CUdeviceptr d, size_t s, uint32_t seed) {
  std::vector<unsigned char> src(s), dst(s);
  for (uint32_t round = 0; round < 2; ++round) {
    testapp::fill(src.data(), s, seed + round);
    std::memset(dst.data(), 0, s);
    DA_CHECK(cuMemcpyHtoD(d, src.data(), s));
    DA_CHECK(cuMemcpyDtoH(dst.data(), d, s));
    TA_ASSERT(testapp::matches(dst.data(), s, seed + round));
  }
}
}  // namespace

int main(int argc, char** argv) {
  const size_t rounds = testapp::arg_size(argc, argv, 1, 2);
  const size_t s = testapp::arg_size(argc, argv, 2, 16 << 20);
  driver_require_gpu("primary_release", cuInit(0));
  CUdevice dev = 0;
  DA_CHECK(cuDeviceGet(&dev, 0));
  CUcontext own = nullptr;
  DA_CHECK(cuCtxCreate(&own, nullptr, 0, dev));  // current from here on
  CUdeviceptr d_own = 0;
  DA_CHECK(cuMemAlloc(&d_own, s));
  for (size_t r = 0; r < rounds; ++r) {
    CUcontext primary = nullptr, again = nullptr;
    DA_CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    DA_CHECK(cuCtxPushCurrent(primary));
    CUdeviceptr d = 0;
    DA_CHECK(cuMemAlloc(&d, s));
    copy_twice(d, s, static_cast<uint32_t>(100 * r));
    // A second reference, released again: not the last, the context stays
    // and its copies go on as before.
    DA_CHECK(cuDevicePrimaryCtxRetain(&again, dev));
    TA_ASSERT(again == primary);
    DA_CHECK(cuDevicePrimaryCtxRelease(dev));
    copy_twice(d, s, static_cast<uint32_t>(100 * r + 20));
    DA_CHECK(cuMemFree(d));
    CUcontext popped = nullptr;
    DA_CHECK(cuCtxPopCurrent(&popped));
    TA_ASSERT(popped == primary);
    DA_CHECK(cuDevicePrimaryCtxRelease(dev));  // the last reference: the context goes
    unsigned flags = 0;
    int active = 1;
    DA_CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
    TA_ASSERT(active == 0);
    copy_twice(d_own, s, static_cast<uint32_t>(100 * r + 50));
  }
  // A buffer the rewrite registered (reused) in the app's context, freed
  // after that context went, on a thread with no context current.
  std::vector<unsigned char> last(s);
  for (uint32_t i = 0; i < 3; ++i) {
    testapp::fill(last.data(), s, 7 + i);
    DA_CHECK(cuMemcpyHtoD(d_own, last.data(), s));
  }
  DA_CHECK(cuMemFree(d_own));
  DA_CHECK(cuCtxDestroy(own));
  last = std::vector<unsigned char>();
  std::printf("primary_release: %zu rounds OK\n", rounds);
  return 0;
}
