// ptds_streams [N=3] [S=256K]
// Built as if with `nvcc --default-stream per-thread`: the runtime calls
// resolve to their per-thread-default-stream entry points (cudaMemcpy_ptds,
// cudaMemcpyAsync_ptsz, ...), which reach the driver's _ptds/_ptsz variants.
//
// Exact traffic (API = exported runtime symbol; the source says cudaMemcpy etc.):
//   cudaMalloc                                               1 call   S bytes    (device)
//   cudaMallocHost                                           1 call   S bytes    (host_pinned)
//   cudaMemsetAsync_ptsz   0x11 over S, default stream      1 call   S bytes    (memset)
//   cudaMemcpy_ptds        H2D pageable -> device           N calls  N*S bytes
//   cudaMemcpyAsync_ptsz   D2H device -> pinned, stream 0   N calls  N*S bytes
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 3);
  const size_t s = testapp::arg_size(argc, argv, 2, 256 << 10);
  testapp::require_gpu("ptds_streams");
  std::vector<unsigned char> src(s);
  void *d = nullptr, *pin = nullptr;
  TA_CHECK(cudaMalloc(&d, s));
  TA_CHECK(cudaMallocHost(&pin, s));
  TA_CHECK(cudaMemsetAsync(d, 0x11, s, 0));
  TA_CHECK(cudaStreamSynchronize(0));
  for (size_t i = 0; i < n; ++i) {
    testapp::fill(src.data(), s, static_cast<uint32_t>(i + 7));
    std::memset(pin, 0, s);
    TA_CHECK(cudaMemcpy(d, src.data(), s, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpyAsync(pin, d, s, cudaMemcpyDeviceToHost, 0));
    TA_CHECK(cudaStreamSynchronize(0));
    TA_ASSERT(testapp::matches(pin, s, static_cast<uint32_t>(i + 7)));
  }
  TA_CHECK(cudaFreeHost(pin));
  TA_CHECK(cudaFree(d));
  testapp::done("ptds_streams");
  return 0;
}
