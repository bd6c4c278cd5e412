#include <cuda_runtime_api.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
int main() {
  const size_t n = 1 << 20;
  void* d = nullptr; cudaMalloc(&d, n);
  char* h = (char*)malloc(n); memset(h, 1, n);
  void* p = nullptr; cudaMallocHost(&p, n);
  for (int i = 0; i < 3; ++i) { if (cudaMemcpy(d, h, n, cudaMemcpyHostToDevice)) return 1; }
  cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost);
  cudaMemcpy(p, d, n, cudaMemcpyDeviceToHost);
  cudaStream_t s; cudaStreamCreate(&s);
  cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s);
  cudaStreamSynchronize(s);
  cudaMemcpy(d, h, 100, cudaMemcpyDefault);
  cudaMemset(d, 0, 4096);
  cudaFree(d); cudaFreeHost(p); free(h);
  printf("ok\n");
}
