// probe_bwtest_pattern: NVIDIA bandwidthTest's pageable pattern, with the time
// of every copy printed, so that a cost paid once per buffer (registration,
// first copies) can be told from one paid on every call. Our own code: a
// fresh malloc per size, two 16 MiB cache-clearing buffers allocated and
// freed around it, 100 synchronous cudaMemcpy timed with the CPU clock, a
// 256 MiB memset of another buffer between copies. `devtools/gpu.sh bw-pattern`
// builds and runs it.
//
//   probe_bwtest_pattern [--host KIND] [--iters N] SIZE...   (SIZE in bytes, K/M suffixes)
// --host: the copied buffer (default pageable, bandwidthTest's):
//   pageable  malloc, as bandwidthTest
//   appreg    malloc, then registered by the program (cudaHostRegister): what
//             registered memory gives with this pattern (--appreg says the same)
//   collapse  malloc, its 2 MiB-aligned interior collapsed into huge pages
//             (MADV_COLLAPSE), then registered
//   huge      a 2 MiB-aligned mapping with MADV_HUGEPAGE before first touch,
//             registered
//   pinned    cudaMallocHost
#include <cuda_runtime_api.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <cstdint>

static double now_us() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
#define CK(x) do { cudaError_t e_ = (x); if (e_) { std::printf("FAIL %s: %s\n", #x, cudaGetErrorName(e_)); std::exit(1); } } while (0)

int main(int argc, char** argv) {
  std::string host = "pageable";
  int iters = 100;
  std::vector<size_t> sizes;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--appreg") { host = "appreg"; continue; }
    if (a == "--host" && i + 1 < argc) { host = argv[++i]; continue; }
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
      const size_t kHuge = 2u << 20;
      const size_t mapped = (size + kHuge - 1) / kHuge * kHuge;
      char* h = nullptr;
      if (host == "pinned") CK(cudaMallocHost(reinterpret_cast<void**>(&h), size));
      else if (host == "huge") {
        char* raw = static_cast<char*>(mmap(nullptr, mapped + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        h = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) & ~uintptr_t(kHuge - 1));
        madvise(h, mapped, MADV_HUGEPAGE);
      } else h = static_cast<char*>(std::malloc(size));
      char* c1 = static_cast<char*>(std::malloc(kClear));
      char* c2 = static_cast<char*>(std::malloc(kClear));
      for (size_t i = 0; i < size; ++i) h[i] = static_cast<char>(i & 0xff);
      std::memset(c1, 0, kClear);
      std::memset(c2, 0, kClear);
      void* d = nullptr;
      CK(cudaMalloc(&d, size));
      if (dir == 1) CK(cudaMemcpy(d, h, size, cudaMemcpyHostToDevice));
      if (host == "collapse") {
        const uintptr_t b = (reinterpret_cast<uintptr_t>(h) + kHuge - 1) & ~uintptr_t(kHuge - 1);
        const uintptr_t e = (reinterpret_cast<uintptr_t>(h) + size) & ~uintptr_t(kHuge - 1);
        const double c0 = now_us();
        int rc = e > b ? madvise(reinterpret_cast<void*>(b), e - b, 25 /* MADV_COLLAPSE */) : -1;
        std::printf("collapse %zu of %zu bytes: rc=%d %.0f us\n", size_t(e > b ? e - b : 0), size, rc, now_us() - c0);
      }
      const bool reg = host == "appreg" || host == "collapse" || host == "huge";
      if (reg) CK(cudaHostRegister(h, size, 0));
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
      std::printf("%s size=%zu host=%s mean_gbps=%.1f first10_us=", dir == 0 ? "H2D" : "D2H", size, host.c_str(),
                  size * iters / sum / 1e3);
      for (int i = 0; i < std::min(iters, 10); ++i) std::printf("%s%.0f", i ? "," : "", t[i]);
      std::printf(" median_rest_us=%.1f median_rest_gbps=%.1f\n", rest.empty() ? 0 : rest[rest.size() / 2],
                  rest.empty() ? 0 : size / rest[rest.size() / 2] / 1e3);
      if (reg) CK(cudaHostUnregister(h));
      CK(cudaFree(d));
      std::free(c1);
      std::free(c2);
      if (host == "pinned") CK(cudaFreeHost(h));
      else if (host != "huge") std::free(h);  // the huge mapping is left: a probe
    }
  std::free(flush);
  return 0;
}
