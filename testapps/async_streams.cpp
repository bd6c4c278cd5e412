// async_streams [N=4] [S=1M]
// cudaMemcpyAsync on two created streams: stream A moves pageable buffers,
// stream B pinned ones; both are synchronised each iteration.
//
// Exact traffic:
//   cudaMalloc                                 2 calls  2*S bytes  (device)
//   cudaMallocHost                             2 calls  2*S bytes  (host_pinned)
//   cudaMemcpyAsync H2D pageable -> device     N calls  N*S bytes  (stream A)
//   cudaMemcpyAsync D2H device -> pageable     N calls  N*S bytes  (stream A)
//   cudaMemcpyAsync H2D pinned -> device       N calls  N*S bytes  (stream B)
//   cudaMemcpyAsync D2H device -> pinned       N calls  N*S bytes  (stream B)
// The pageable async copies are what cuxfer's `async_pageable` finding is for.
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 4);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  testapp::require_gpu("async_streams");
  std::vector<unsigned char> pg_src(s), pg_dst(s);
  void *pin_src = nullptr, *pin_dst = nullptr, *da = nullptr, *db = nullptr;
  TA_CHECK(cudaMallocHost(&pin_src, s));
  TA_CHECK(cudaMallocHost(&pin_dst, s));
  TA_CHECK(cudaMalloc(&da, s));
  TA_CHECK(cudaMalloc(&db, s));
  cudaStream_t a = nullptr, b = nullptr;
  TA_CHECK(cudaStreamCreate(&a));
  TA_CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  for (size_t i = 0; i < n; ++i) {
    const auto seed_a = static_cast<uint32_t>(2 * i), seed_b = static_cast<uint32_t>(2 * i + 1);
    testapp::fill(pg_src.data(), s, seed_a);
    testapp::fill(pin_src, s, seed_b);
    std::memset(pg_dst.data(), 0, s);
    std::memset(pin_dst, 0, s);
    TA_CHECK(cudaMemcpyAsync(da, pg_src.data(), s, cudaMemcpyHostToDevice, a));
    TA_CHECK(cudaMemcpyAsync(pg_dst.data(), da, s, cudaMemcpyDeviceToHost, a));
    TA_CHECK(cudaMemcpyAsync(db, pin_src, s, cudaMemcpyHostToDevice, b));
    TA_CHECK(cudaMemcpyAsync(pin_dst, db, s, cudaMemcpyDeviceToHost, b));
    TA_CHECK(cudaStreamSynchronize(a));
    TA_CHECK(cudaStreamSynchronize(b));
    TA_ASSERT(testapp::matches(pg_dst.data(), s, seed_a));
    TA_ASSERT(testapp::matches(pin_dst, s, seed_b));
  }
  TA_CHECK(cudaStreamDestroy(a));
  TA_CHECK(cudaStreamDestroy(b));
  TA_CHECK(cudaFree(da));
  TA_CHECK(cudaFree(db));
  TA_CHECK(cudaFreeHost(pin_src));
  TA_CHECK(cudaFreeHost(pin_dst));
  testapp::done("async_streams");
  return 0;
}
