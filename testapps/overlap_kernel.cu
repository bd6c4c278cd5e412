// overlap_kernel [C=8] [S=64M]   (GPU only; built by nvcc with static and shared cudart)
// Async H2D of C chunks (S/C bytes each, pinned source) on stream A while a
// long kernel runs on stream B; then one D2H of the whole buffer on stream A.
//
// Exact traffic:
//   cudaMalloc                                2 calls  S + 4 bytes (device: data, spin counter)
//   cudaMallocHost                            1 call   S bytes     (host_pinned)
//   cudaMemcpyAsync H2D  pinned -> device     C calls  S bytes     (stream A)
//   cudaMemcpyAsync D2H  device -> pinned     1 call   S bytes     (stream A)
//   kernel launches                           1 (stream B)
#include "common.h"

__global__ void spin(unsigned* counter, unsigned long long cycles) {
  unsigned long long start = clock64();
  while (clock64() - start < cycles) {
  }
  atomicAdd(counter, 1u);
}

int main(int argc, char** argv) {
  const size_t c = testapp::arg_size(argc, argv, 1, 8);
  const size_t s = testapp::arg_size(argc, argv, 2, 64 << 20);
  TA_ASSERT(c > 0 && s % c == 0);
  testapp::require_gpu("overlap_kernel");
  const size_t chunk = s / c;
  unsigned char* host = nullptr;
  unsigned char* d = nullptr;
  unsigned* counter = nullptr;
  TA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host), s));
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&d), s));
  TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&counter), sizeof(unsigned)));
  testapp::fill(host, s, 9);
  cudaStream_t a = nullptr, b = nullptr;
  TA_CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  TA_CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  spin<<<1, 1, 0, b>>>(counter, 200000000ull);  // ~0.1 s: the copies overlap it
  TA_CHECK(cudaGetLastError());
  for (size_t i = 0; i < c; ++i)
    TA_CHECK(cudaMemcpyAsync(d + i * chunk, host + i * chunk, chunk, cudaMemcpyHostToDevice, a));
  TA_CHECK(cudaStreamSynchronize(a));
  std::memset(host, 0, s);
  TA_CHECK(cudaMemcpyAsync(host, d, s, cudaMemcpyDeviceToHost, a));
  TA_CHECK(cudaStreamSynchronize(a));
  TA_CHECK(cudaStreamSynchronize(b));
  TA_ASSERT(testapp::matches(host, s, 9));
  TA_CHECK(cudaStreamDestroy(a));
  TA_CHECK(cudaStreamDestroy(b));
  TA_CHECK(cudaFree(counter));
  TA_CHECK(cudaFree(d));
  TA_CHECK(cudaFreeHost(host));
  testapp::done("overlap_kernel");
  return 0;
}
