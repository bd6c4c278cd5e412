// threads [T=4] [N=50] [S=64K]
// T threads, each with its own device buffer, each doing N pageable round trips.
// The threads start together (a barrier) so that their first CUDA calls race
// each other: a tracer must not lose calls made while it is still starting up.
//
// Exact traffic:
//   cudaMalloc                          T calls    T*S bytes    (device)
//   cudaMemcpy H2D  pageable -> device  T*N calls  T*N*S bytes
//   cudaMemcpy D2H  device -> pageable  T*N calls  T*N*S bytes
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t t = testapp::arg_size(argc, argv, 1, 4);
  const size_t n = testapp::arg_size(argc, argv, 2, 50);
  const size_t s = testapp::arg_size(argc, argv, 3, 64 << 10);
  testapp::require_gpu("threads");
  std::atomic<int> failures{0};
  std::barrier start(static_cast<std::ptrdiff_t>(t));
  std::vector<std::thread> pool;
  for (size_t k = 0; k < t; ++k) {
    pool.emplace_back([&, k] {
      std::vector<unsigned char> src(s), dst(s);
      void* d = nullptr;
      start.arrive_and_wait();
      TA_CHECK(cudaMalloc(&d, s));
      for (size_t i = 0; i < n; ++i) {
        const auto seed = static_cast<uint32_t>(k * 100000 + i);
        testapp::fill(src.data(), s, seed);
        std::memset(dst.data(), 0, s);
        TA_CHECK(cudaMemcpy(d, src.data(), s, cudaMemcpyHostToDevice));
        TA_CHECK(cudaMemcpy(dst.data(), d, s, cudaMemcpyDeviceToHost));
        if (!testapp::matches(dst.data(), s, seed)) failures++;
      }
      TA_CHECK(cudaFree(d));
    });
  }
  for (auto& th : pool) th.join();
  TA_ASSERT(failures == 0);
  testapp::done("threads");
  return 0;
}
