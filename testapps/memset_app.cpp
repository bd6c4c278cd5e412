// memset_app [S=1M] [W=1000] [H=32]
// The three runtime memsets, each checked by copying the memory back.
//
// Exact traffic:
//   cudaMalloc                              1 call   S bytes        (device)
//   cudaMallocPitch                         1 call   pitch*H bytes  (device)
//   cudaMemset        0xAB over S           1 call   S bytes        (memset)
//   cudaMemsetAsync   0x5A over S/2         1 call   S/2 bytes      (memset, created stream)
//   cudaMemset2D      0x33 over W x H       1 call   W*H bytes      (memset)
//   cudaMemcpy   D2H  device -> pageable    1 call   S bytes
//   cudaMemcpy2D D2H  device -> pageable    1 call   W*H bytes
#include <vector>

#include "common.h"

int main(int argc, char** argv) {
  const size_t s = testapp::arg_size(argc, argv, 1, 1 << 20);
  const size_t w = testapp::arg_size(argc, argv, 2, 1000);
  const size_t h = testapp::arg_size(argc, argv, 3, 32);
  testapp::require_gpu("memset_app");
  unsigned char* d = nullptr;
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), s));
  cudaStream_t st = nullptr;
  TA_CHECK(cudaStreamCreate(&st));
  TA_CHECK(cudaMemset(d, 0xAB, s));
  TA_CHECK(cudaMemsetAsync(d, 0x5A, s / 2, st));
  TA_CHECK(cudaStreamSynchronize(st));
  std::vector<unsigned char> back(s, 0);
  TA_CHECK(cudaMemcpy(back.data(), d, s, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < s; ++i) TA_ASSERT(back[i] == (i < s / 2 ? 0x5A : 0xAB));

  void* pd = nullptr;
  size_t pitch = 0;
  TA_CHECK(cudaMallocPitch(&pd, &pitch, w, h));
  TA_CHECK(cudaMemset2D(pd, pitch, 0x33, w, h));
  std::vector<unsigned char> img(w * h, 0);
  TA_CHECK(cudaMemcpy2D(img.data(), w, pd, pitch, w, h, cudaMemcpyDeviceToHost));
  for (unsigned char c : img) TA_ASSERT(c == 0x33);

  TA_CHECK(cudaStreamDestroy(st));
  TA_CHECK(cudaFree(pd));
  TA_CHECK(cudaFree(d));
  testapp::done("memset_app");
  return 0;
}
