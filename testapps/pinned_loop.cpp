// pinned_loop [N=8] [S=1M]
// N round trips of S bytes between cudaMallocHost'd (pinned) memory and device.
//
// Exact traffic:
//   cudaMalloc                        1 call   S bytes     (device)
//   cudaMallocHost                    2 calls  2*S bytes   (host_pinned: src, dst)
//   cudaMemcpy H2D  pinned -> device  N calls  N*S bytes
//   cudaMemcpy D2H  device -> pinned  N calls  N*S bytes
#include "common.h"

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 8);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  testapp::require_gpu("pinned_loop");
  void *src = nullptr, *dst = nullptr, *d = nullptr;
  TA_CHECK(cudaMallocHost(&src, s));
  TA_CHECK(cudaMallocHost(&dst, s));
  TA_CHECK(cudaMalloc(&d, s));
  for (size_t i = 0; i < n; ++i) {
    testapp::fill(src, s, static_cast<uint32_t>(i));
    std::memset(dst, 0, s);
    TA_CHECK(cudaMemcpy(d, src, s, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpy(dst, d, s, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(dst, s, static_cast<uint32_t>(i)));
  }
  TA_CHECK(cudaFree(d));
  TA_CHECK(cudaFreeHost(dst));
  TA_CHECK(cudaFreeHost(src));
  testapp::done("pinned_loop");
  return 0;
}
