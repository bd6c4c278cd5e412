// rewrite_bandwidth: what the pinned rewrite (CUXFER_REWRITE=pin) buys on
// pageable copies, measured from the app's side. bench/run_rewrite_bandwidth.sh
// runs it without and with libcuxfer.so preloaded and prints the comparison;
// docs/benchmarks.md describes the method.
//
// Runtime API (cudaMemcpy / cudaMemcpyAsync): links the real cudart on a GPU
// machine, or the simulated one (tests/simcuda) on CI, where the numbers mean
// nothing but the program and its output format are exercised.
//
// For each size (4 B ... 1 GiB, capped by --max-size) and direction (H2D, D2H)
// it times synchronous cudaMemcpy with host memory that is
//   pinned           cudaMallocHost, allocated once
//   pageable         malloc'd once, touched, reused by every rep
//   pageable_first   a fresh malloc per rep, never seen by CUDA (or by a
//                    registration/staging cache) before: for H2D it is filled
//                    first (that touches it, as any real source is), for D2H it
//                    is left untouched, so the copy takes the page faults
// Bandwidth comes from CUDA events recorded on the legacy default stream
// around the copy (a synchronous copy is complete when the call returns, so
// the stop event marks the end of everything the call did, host staging
// included); the wall time of the call (clock_gettime) is reported beside it.
// Large buffers (>= 128 KiB) are served by mmap on every malloc
// (mallopt(M_MMAP_THRESHOLD) pins glibc's threshold), so a "first use" buffer
// really is new memory, not a recycled heap chunk.
//
// Then, at 1 MiB and 64 MiB (capped too), the time until cudaMemcpyAsync H2D
// returns, from a pinned and from a reused pageable source, on a created
// stream; the stream is synchronised outside that timing.
//
// One line per measurement:
//   mode=<pinned|pageable|pageable_first> dir=<H2D|D2H> size=<B> median_gbps=<x>
//       median_us=<event us> wall_us=<call us> reps=<n> [label=<text>]
//   mode=<pinned|pageable> dir=H2D_async size=<B> median_return_us=<x>
//       median_gbps=<call..sync> reps=<n> [label=<text>]
// GB/s are 1e9 bytes per second. Exit status: 0 measured; 77 no GPU; 1 a CUDA
// call failed; 2 bad arguments.
#include <cuda_runtime_api.h>
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"

namespace {

using bench::median;
using bench::now_us;
using bench::parse_size;

void usage() {
  std::fprintf(stderr,
               "usage: rewrite_bandwidth [--max-size N] [--min-size N] [--reps R] [--label TEXT]\n"
               "  --max-size N   largest size measured (K/M/G suffixes; default 1G)\n"
               "  --min-size N   smallest size measured (default 4)\n"
               "  --reps R       timed reps per case (default: 5..50, fewer for large sizes)\n"
               "  --label TEXT   appended to every line as label=TEXT\n");
}

struct Opts {
  size_t max_size = size_t{1} << 30;
  size_t min_size = 4;
  int reps = 0;  // 0: by size
  std::string label;
};

int reps_for(const Opts& o, size_t size) {
  if (o.reps > 0) return o.reps;
  const size_t by_volume = (size_t{256} << 20) / size;  // ~256 MiB per case
  return static_cast<int>(std::clamp<size_t>(by_volume, 5, 50));
}

// Fast, rep-dependent content (memset would do, but content should differ per rep).
void fill_words(void* p, size_t n, uint64_t seed) {
  auto* b = static_cast<unsigned char*>(p);
  size_t i = 0;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (; i + 8 <= n; i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    std::memcpy(b + i, &x, 8);
  }
  for (; i < n; ++i) b[i] = static_cast<unsigned char>(seed + i);
}

class Bench {
 public:
  explicit Bench(Opts o) : o_(std::move(o)) {
    CHECK(cudaEventCreate(&ev0_));
    CHECK(cudaEventCreate(&ev1_));
    CHECK(cudaStreamCreate(&stream_));
  }
  ~Bench() {
    cudaEventDestroy(ev0_);
    cudaEventDestroy(ev1_);
    cudaStreamDestroy(stream_);
  }

  void sync_case(const char* mode, cudaMemcpyKind kind, size_t size) {
    const bool h2d = kind == cudaMemcpyHostToDevice;
    const bool first_use = std::strcmp(mode, "pageable_first") == 0;
    const bool pinned = std::strcmp(mode, "pinned") == 0;
    void* dev = nullptr;
    CHECK(cudaMalloc(&dev, size));
    CHECK(cudaMemset(dev, 0x5a, size));
    void* host = nullptr;
    if (pinned) {
      CHECK(cudaMallocHost(&host, size));
      fill_words(host, size, 1);
    } else if (!first_use) {
      host = std::malloc(size);
      if (!host) oom(size);
      fill_words(host, size, 1);
    }
    const int reps = reps_for(o_, size);
    const int warmup = first_use ? 0 : 1;
    std::vector<double> ev_us, wall_us;
    for (int r = -warmup; r < reps; ++r) {
      void* h = host;
      if (first_use) {
        h = std::malloc(size);
        if (!h) oom(size);
        if (h2d) fill_words(h, size, static_cast<uint64_t>(r + 2));
      }
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaEventRecord(ev0_, 0));
      const double t0 = now_us();
      CHECK(h2d ? cudaMemcpy(dev, h, size, kind) : cudaMemcpy(h, dev, size, kind));
      const double t1 = now_us();
      CHECK(cudaEventRecord(ev1_, 0));
      CHECK(cudaEventSynchronize(ev1_));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, ev0_, ev1_));
      if (!h2d) sink_ ^= static_cast<const unsigned char*>(h)[size - 1];
      if (first_use) std::free(h);
      if (r < 0) continue;
      ev_us.push_back(static_cast<double>(ms) * 1e3);
      wall_us.push_back(t1 - t0);
    }
    const double med = median(ev_us);
    std::printf("mode=%s dir=%s size=%zu median_gbps=%.4g median_us=%.2f wall_us=%.2f reps=%d%s%s\n", mode,
                h2d ? "H2D" : "D2H", size, med > 0 ? static_cast<double>(size) / med * 1e-3 : 0.0, med,
                median(wall_us), reps, o_.label.empty() ? "" : " label=", o_.label.c_str());
    std::fflush(stdout);
    if (pinned) CHECK(cudaFreeHost(host));
    else std::free(host);
    CHECK(cudaFree(dev));
  }

  void async_case(const char* mode, size_t size) {
    const bool pinned = std::strcmp(mode, "pinned") == 0;
    void* dev = nullptr;
    CHECK(cudaMalloc(&dev, size));
    void* host = nullptr;
    if (pinned) CHECK(cudaMallocHost(&host, size));
    else host = std::malloc(size);
    if (!host) oom(size);
    fill_words(host, size, 3);
    const int reps = std::max(reps_for(o_, size), 10);
    std::vector<double> ret_us, total_us;
    for (int r = -1; r < reps; ++r) {
      CHECK(cudaStreamSynchronize(stream_));
      const double t0 = now_us();
      CHECK(cudaMemcpyAsync(dev, host, size, cudaMemcpyHostToDevice, stream_));
      const double t1 = now_us();
      CHECK(cudaStreamSynchronize(stream_));
      const double t2 = now_us();
      if (r < 0) continue;
      ret_us.push_back(t1 - t0);
      total_us.push_back(t2 - t0);
    }
    const double tot = median(total_us);
    std::printf("mode=%s dir=H2D_async size=%zu median_return_us=%.2f median_gbps=%.4g reps=%d%s%s\n", mode, size,
                median(ret_us), tot > 0 ? static_cast<double>(size) / tot * 1e-3 : 0.0, reps,
                o_.label.empty() ? "" : " label=", o_.label.c_str());
    std::fflush(stdout);
    if (pinned) CHECK(cudaFreeHost(host));
    else std::free(host);
    CHECK(cudaFree(dev));
  }

  unsigned sink() const { return sink_; }

 private:
  [[noreturn]] static void oom(size_t size) {
    std::fprintf(stderr, "rewrite_bandwidth: malloc(%zu) failed\n", size);
    std::exit(1);
  }
  Opts o_;
  cudaEvent_t ev0_ = nullptr, ev1_ = nullptr;
  cudaStream_t stream_ = nullptr;
  unsigned sink_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  bench::g_program = "rewrite_bandwidth";
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--max-size" || a == "--min-size") {
      const char* v = next();
      if (!parse_size(v, a == "--max-size" ? &o.max_size : &o.min_size)) {
        std::fprintf(stderr, "rewrite_bandwidth: bad size '%s'\n", v);
        return 2;
      }
    } else if (a == "--reps") {
      o.reps = std::atoi(next());
    } else if (a == "--label") {
      o.label = next();
    } else {
      usage();
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  if (o.max_size == 0 || o.reps < 0) {
    usage();
    return 2;
  }

  // Every malloc >= 128 KiB is a fresh mmap, freed by munmap: "first use"
  // buffers are new pages, and glibc's dynamic threshold does not move them
  // onto the heap after the first free.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);

  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < 1) {
    std::printf("rewrite_bandwidth: no GPU (%s, %d device(s)): skipping\n",
                e == cudaSuccess ? "cudaSuccess" : cudaGetErrorName(e), count);
    return 77;
  }
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // create the context outside any timing

  const size_t sizes[] = {4,         4 << 10,   64 << 10,  256 << 10,          1 << 20,
                          4 << 20,   16 << 20,  64 << 20,  size_t{256} << 20,  size_t{1} << 30};
  Bench b(o);
  for (size_t s : sizes) {
    if (s < o.min_size || s > o.max_size) continue;
    for (cudaMemcpyKind k : {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost})
      for (const char* mode : {"pinned", "pageable", "pageable_first"}) b.sync_case(mode, k, s);
  }
  for (size_t s : {size_t{1} << 20, size_t{64} << 20}) {
    if (s > o.max_size) continue;
    for (const char* mode : {"pinned", "pageable"}) b.async_case(mode, s);
  }
  return b.sink() == 0x100 ? 3 : 0;  // never: keeps the D2H reads alive
}
