// tiny_storm [N=5000] [S=64]
// N tiny H2D copies of S bytes from pageable memory, each to its own slot of a
// device buffer, then one D2H of the whole buffer to check them all.
//
// Exact traffic:
//   cudaMalloc                          1 call   N*S bytes  (device)
//   cudaMemcpy H2D  pageable -> device  N calls  N*S bytes
//   cudaMemcpy D2H  device -> pageable  1 call   N*S bytes
// The many tiny copies are what cuxfer's `tiny_storm` finding is for.
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 5000);
  const size_t s = testapp::arg_size(argc, argv, 2, 64);
  testapp::require_gpu("tiny_storm");
  std::vector<unsigned char> src(n * s), back(n * s, 0);
  testapp::fill(src.data(), src.size(), 42);
  unsigned char* d = nullptr;
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), n * s));
  for (size_t i = 0; i < n; ++i) TA_CHECK(cudaMemcpy(d + i * s, src.data() + i * s, s, cudaMemcpyHostToDevice));
  TA_CHECK(cudaMemcpy(back.data(), d, n * s, cudaMemcpyDeviceToHost));
  TA_ASSERT(testapp::matches(back.data(), back.size(), 42));
  TA_CHECK(cudaFree(d));
  testapp::done("tiny_storm");
  return 0;
}
