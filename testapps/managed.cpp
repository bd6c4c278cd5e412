// managed [N=2] [S=1M]
// Copies between cudaMallocManaged memory and device memory with
// cudaMemcpyDefault (the idiom for unified memory).
//
// Exact traffic:
//   cudaMallocManaged                       2 calls  2*S bytes  (managed: src, dst)
//   cudaMalloc                              1 call   S bytes    (device)
//   cudaMemcpy (Default) managed -> device  N calls  N*S bytes  (reported H2D, memory "managed")
//   cudaMemcpy (Default) device -> managed  N calls  N*S bytes  (reported D2H, memory "managed")
#include "common.h"

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 2);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  testapp::require_gpu("managed");
  void *msrc = nullptr, *mdst = nullptr, *d = nullptr;
  TA_CHECK(cudaMallocManaged(&msrc, s, cudaMemAttachGlobal));
  TA_CHECK(cudaMallocManaged(&mdst, s, cudaMemAttachGlobal));
  TA_CHECK(cudaMalloc(&d, s));
  for (size_t i = 0; i < n; ++i) {
    testapp::fill(msrc, s, static_cast<uint32_t>(i + 100));
    std::memset(mdst, 0, s);
    TA_CHECK(cudaMemcpy(d, msrc, s, cudaMemcpyDefault));
    TA_CHECK(cudaMemcpy(mdst, d, s, cudaMemcpyDefault));
    TA_CHECK(cudaDeviceSynchronize());
    TA_ASSERT(testapp::matches(mdst, s, static_cast<uint32_t>(i + 100)));
  }
  cudaPointerAttributes attr{};
  TA_CHECK(cudaPointerGetAttributes(&attr, msrc));
  TA_ASSERT(attr.type == cudaMemoryTypeManaged);
  TA_CHECK(cudaFree(d));
  TA_CHECK(cudaFree(mdst));
  TA_CHECK(cudaFree(msrc));
  testapp::done("managed");
  return 0;
}
