// reset_app [N=3] [S=16M]
// cudaDeviceReset in the middle of a run, then the app carries on: N round
// trips of S bytes through pageable memory, cudaDeviceReset (every allocation
// and pinned buffer of the context is gone), then N more with new allocations.
// Under the pinned rewrite the shim's staging pool and registrations belonged
// to the destroyed context: the copies after the reset must still be exact.
//
// Exact traffic:
//   cudaMalloc                          2 calls  2*S bytes (one before, one after the reset)
//   cudaMemcpy H2D  pageable -> device  2N calls 2N*S bytes
//   cudaMemcpy D2H  device -> pageable  2N calls 2N*S bytes
#include <vector>

#include "common.h"

namespace {

void round_trips(size_t n, size_t s, uint32_t seed) {
  std::vector<unsigned char> src(s), dst(s);
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, s));
  for (size_t i = 0; i < n; ++i) {
    testapp::fill(src.data(), s, seed + static_cast<uint32_t>(i));
    TA_CHECK(cudaMemcpy(d, src.data(), s, cudaMemcpyHostToDevice));
    std::fill(dst.begin(), dst.end(), 0);
    TA_CHECK(cudaMemcpy(dst.data(), d, s, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(dst.data(), s, seed + static_cast<uint32_t>(i)));
  }
  // Not freed before the reset: the reset frees it (and the app must not touch it after).
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 3);
  const size_t s = testapp::arg_size(argc, argv, 2, 16 << 20);
  testapp::require_gpu("reset_app");
  round_trips(n, s, 10);
  TA_CHECK(cudaDeviceReset());
  round_trips(n, s, 20);
  testapp::done("reset_app");
  return 0;
}
