// staging_declined [S=4M] [N=4]
// A reused buffer's copy that reserves its registration for the shim's
// background registrar while the staging pool has no buffer free: the copy
// is left as made, and nothing about its range may wait for the registration
// this same copy is still holding back (it hung for ever once:
// gpu.rewrite_exactness on an H100). Run under --rewrite=pin with
// a staging pool of one buffer (CUXFER_PINNED_BUDGET=16M), the H2D staging
// threshold at 1 MiB and, on the simulated CUDA, SIMCUDA_EVENTS_PENDING=1
// (an async copy's DMA counts as in flight until the app synchronises)
// (e2e.rewrite.staging_declined, run_staging_declined.py):
//   1. cudaMemcpyAsync H2D of S from fresh pageable memory on a stream, not
//      waited for: staged, it holds the pool's one buffer;
//   2. N rounds of cudaMemcpy H2D of S from one reused pageable buffer and
//      cudaMemcpy D2H back into another: no staging buffer is free, the second
//      round's copies prove the buffers reused;
//   3. the stream synchronised, the first copy's bytes checked.
// Exact traffic: cudaMalloc 2 calls 2*S; cudaMemcpyAsync H2D 1 call S;
// cudaMemcpy H2D N calls N*S; cudaMemcpy D2H N+1 calls (N+1)*S.
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t s = testapp::arg_size(argc, argv, 1, 4 << 20);
  const size_t n = testapp::arg_size(argc, argv, 2, 4);
  testapp::require_gpu("staging_declined");
  void *d_a = nullptr, *d_b = nullptr;
  TA_CHECK(cudaMalloc(&d_a, s));
  TA_CHECK(cudaMalloc(&d_b, s));
  cudaStream_t stream = nullptr;
  TA_CHECK(cudaStreamCreate(&stream));
  std::vector<unsigned char> a(s), b(s), back(s);
  testapp::fill(a.data(), s, 1);
  TA_CHECK(cudaMemcpyAsync(d_a, a.data(), s, cudaMemcpyHostToDevice, stream));
  for (size_t i = 0; i < n; ++i) {
    const auto seed = static_cast<uint32_t>(10 + i);
    testapp::fill(b.data(), s, seed);
    TA_CHECK(cudaMemcpy(d_b, b.data(), s, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpy(back.data(), d_b, s, cudaMemcpyDeviceToHost));
    TA_ASSERT(testapp::matches(back.data(), s, seed));
  }
  TA_CHECK(cudaStreamSynchronize(stream));
  TA_CHECK(cudaMemcpy(back.data(), d_a, s, cudaMemcpyDeviceToHost));
  TA_ASSERT(testapp::matches(back.data(), s, 1));
  TA_CHECK(cudaStreamDestroy(stream));
  TA_CHECK(cudaFree(d_b));
  TA_CHECK(cudaFree(d_a));
  testapp::done("staging_declined");
  return 0;
}
