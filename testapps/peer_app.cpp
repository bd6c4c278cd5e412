// peer_app [N=3] [S=1M]
// Device-to-device copies across two GPUs with cudaMemcpyPeer (needs 2 devices;
// run the simulation with SIMCUDA_DEVICE_COUNT=2; with fewer it prints
// "no GPU" and exits 77).
//
// Exact traffic:
//   cudaMalloc                           2 calls  2*S bytes (device 0 and 1)
//   cudaMemcpy H2D  pageable -> device   1 call   S bytes   (into device 0)
//   cudaMemcpyPeer  device 0 -> device 1 N calls  N*S bytes (peer)
//   cudaMemcpy D2H  device -> pageable   1 call   S bytes   (from device 1)
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 3);
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  testapp::require_gpu("peer_app", 2);
  std::vector<unsigned char> src(s), dst(s, 0);
  testapp::fill(src.data(), s, 77);
  void *d0 = nullptr, *d1 = nullptr;
  TA_CHECK(cudaSetDevice(1));
  TA_CHECK(cudaMalloc(&d1, s));
  TA_CHECK(cudaSetDevice(0));
  TA_CHECK(cudaMalloc(&d0, s));
  TA_CHECK(cudaMemcpy(d0, src.data(), s, cudaMemcpyHostToDevice));
  for (size_t i = 0; i < n; ++i) TA_CHECK(cudaMemcpyPeer(d1, 1, d0, 0, s));
  TA_CHECK(cudaSetDevice(1));
  TA_CHECK(cudaMemcpy(dst.data(), d1, s, cudaMemcpyDeviceToHost));
  TA_ASSERT(testapp::matches(dst.data(), s, 77));
  TA_CHECK(cudaFree(d1));
  TA_CHECK(cudaSetDevice(0));
  TA_CHECK(cudaFree(d0));
  testapp::done("peer_app");
  return 0;
}
