// pageable_loop [N=8] [S=1M]
// N round trips of S bytes between malloc'd (pageable) host memory and device.
//
// Exact traffic:
//   cudaMalloc                          1 call   S bytes          (device)
//   cudaMemcpy H2D  pageable -> device  N calls  N*S bytes
//   cudaMemcpy D2H  device -> pageable  N calls  N*S bytes
// Each iteration: H2D from `src`, D2H into `dst`, verify dst == src.
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 8);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  testapp::require_gpu("pageable_loop");
  std::vector<unsigned char> src(s), dst(s);
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, s));
  for (size_t i = 0; i < n; ++i) {
    testapp::fill(src.data(), s, static_cast<uint32_t>(i));
    std::memset(dst.data(), 0, s);
    TA_CHECK(cudaMemcpy(d, src.data(), s, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpy(dst.data(), d, s, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(dst.data(), s, static_cast<uint32_t>(i)));
  }
  TA_CHECK(cudaFree(d));
  testapp::done("pageable_loop");
  return 0;
}
