// probe_bwtest_pattern: NVIDIA bandwidthTest's pageable pattern, with the time
// of every copy printed, so that a cost paid once per buffer (registration,
// first copies) can be told from one paid on every call. Our own code: a
// fresh malloc per size, two 16 MiB cache-clearing buffers allocated and
// freed around it, 100 synchronous cudaMemcpy timed with the CPU clock, a
// 256 MiB memset of another buffer between copies.
//
//   probe_bwtest_pattern [--appreg] [--iters N] SIZE...   (SIZE in bytes, K/M suffixes)
// --appreg: the program registers its own buffer (cudaHostRegister), as a
// reference for what registered memory gives with this pattern.
#include <cuda_runtime_api.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
#define CK(x) do { cudaError_t e_ = (x); if (e_) { std::printf("FAIL %s: %s\n", #x, cudaGetErrorName(e_)); std::exit(1); } } while (0)

int main(int argc, char** argv) {
  bool appreg = false;
  int iters = 100;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--appreg") { appreg = true; continue; }
    if (a == "--iters" && i + 1 < argc) { iters = std::atoi(argv[++i]); continue; }
    char* end = nullptr;
    size_t v = std::strtoull(a.c_str(), &end, 10);
    if (*end == 'K') v <<= 10; else if (*end == 'M') v <<= 20;
    sizes.push_back(v);
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) { std::puts("no GPU"); return 77; }
  const size_t kFlush = 256u << 20, kClear = 16u << 20;
  char* flush = static_cast<char*>(std::malloc(kFlush));
  std::memset(flush, 1, kFlush);
  for (int dir = 0; dir < 2; ++dir)
    for (size_t size : sizes) {
      char* h = static_cast<char*>(std::malloc(size));
      char* c1 = static_cast<char*>(std::malloc(kClear));
      char* c2 = static_cast<char*>(std::malloc(kClear));
      for (size_t i = 0; i < size; ++i) h[i] = static_cast<char>(i & 0xff);
      std::memset(c1, 0, kClear);
      std::memset(c2, 0, kClear);
      void* d = nullptr;
      CK(cudaMalloc(&d, size));
      if (dir == 1) CK(cudaMemcpy(d, h, size, cudaMemcpyHostToDevice));
      if (appreg) CK(cudaHostRegister(h, size, 0));
      std::vector<double> t(iters);
      for (int i = 0; i < iters; ++i) {
        double t0 = now_us();
        if (dir == 0) CK(cudaMemcpy(d, h, size, cudaMemcpyHostToDevice));
        else CK(cudaMemcpy(h, d, size, cudaMemcpyDeviceToHost));
        t[i] = now_us() - t0;
        std::memset(flush, i, kFlush);
      }
      double sum = 0;
      for (double x : t) sum += x;
      std::vector<double> rest(t.begin() + std::min(iters, 10), t.end());
      std::sort(rest.begin(), rest.end());
      std::printf("%s size=%zu appreg=%d mean_gbps=%.1f first10_us=", dir == 0 ? "H2D" : "D2H", size, appreg,
                  size * iters / sum / 1e3);
      for (int i = 0; i < std::min(iters, 10); ++i) std::printf("%s%.0f", i ? "," : "", t[i]);
      std::printf(" median_rest_us=%.1f median_rest_gbps=%.1f\n", rest.empty() ? 0 : rest[rest.size() / 2],
                  rest.empty() ? 0 : size / rest[rest.size() / 2] / 1e3);
      if (appreg) CK(cudaHostUnregister(h));
      CK(cudaFree(d));
      std::free(c1);
      std::free(c2);
      std::free(h);
    }
  std::free(flush);
  return 0;
}
