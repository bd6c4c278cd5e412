// context_per_test [CONTEXTS=4] [S=16M]
// What PyCUDA's test suite does: every test makes its own context
// (cuCtxCreate), copies, and destroys it. Each context: cuMemAlloc S bytes,
// then twice H2D then D2H of S bytes from pageable buffers (sync), every byte
// checked; the buffers are freed and the context destroyed before the next.
// Under --rewrite=pin every context's copies are served (each gets its own
// staging pool), not only the first one's.
//
// Exact traffic, per context (CONTEXTS of them):
//   cuMemcpyHtoD_v2  H2D pageable -> device   2 calls  2*S bytes
//   cuMemcpyDtoH_v2  D2H device -> pageable   2 calls  2*S bytes
// Prints "context_per_test: <n> contexts OK".
#include <vector>

#include "driver_common.h"

int main(int argc, char** argv) {
  const size_t contexts = testapp::arg_size(argc, argv, 1, 4);
  const size_t s = testapp::arg_size(argc, argv, 2, 16 << 20);
  driver_require_gpu("context_per_test", cuInit(0));
  CUdevice dev = 0;
  DA_CHECK(cuDeviceGet(&dev, 0));
  for (size_t c = 0; c < contexts; ++c) {
    CUcontext ctx = nullptr;
    DA_CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));  // CUDA 13: cuCtxCreate_v4, no creation parameters
    CUdeviceptr d = 0;
    DA_CHECK(cuMemAlloc(&d, s));
    std::vector<unsigned char> src(s), dst(s);
    for (uint32_t round = 0; round < 2; ++round) {
      const auto seed = static_cast<uint32_t>(c * 10 + round);
      testapp::fill(src.data(), s, seed);
      std::memset(dst.data(), 0, s);
      DA_CHECK(cuMemcpyHtoD(d, src.data(), s));
      DA_CHECK(cuMemcpyDtoH(dst.data(), d, s));
      TA_ASSERT(testapp::matches(dst.data(), s, seed));
    }
    DA_CHECK(cuMemFree(d));
    DA_CHECK(cuCtxDestroy(ctx));
  }
  std::printf("context_per_test: %zu contexts OK\n", contexts);
  return 0;
}
