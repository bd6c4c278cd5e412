// kernel_loop [N=8] [S=4M]   (GPU only; built by nvcc with static and shared cudart)
// N iterations of: H2D (pageable), a kernel that adds 1 to every byte, D2H.
//
// Exact traffic:
//   cudaMalloc                          1 call   S bytes   (device)
//   cudaMemcpy H2D  pageable -> device  N calls  N*S bytes
//   cudaMemcpy D2H  device -> pageable  N calls  N*S bytes
//   kernel launches                     N
#include <vector>

#include "common.h"

__global__ void add_one(unsigned char* p, size_t n) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] += 1;
}

int main(int argc, char** argv) {
  const size_t n = testapp::arg_size(argc, argv, 1, 8);
  const size_t s = testapp::arg_size(argc, argv, 2, 4 << 20);
  testapp::require_gpu("kernel_loop");
  std::vector<unsigned char> src(s), dst(s);
  unsigned char* d = nullptr;
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), s));
  for (size_t i = 0; i < n; ++i) {
    testapp::fill(src.data(), s, static_cast<uint32_t>(i));
    TA_CHECK(cudaMemcpy(d, src.data(), s, cudaMemcpyHostToDevice));
    add_one<<<264, 256>>>(d, s);
    TA_CHECK(cudaGetLastError());
    TA_CHECK(cudaMemcpy(dst.data(), d, s, cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < s; ++k) TA_ASSERT(dst[k] == static_cast<unsigned char>(src[k] + 1));
  }
  TA_CHECK(cudaFree(d));
  testapp::done("kernel_loop");
  return 0;
}
