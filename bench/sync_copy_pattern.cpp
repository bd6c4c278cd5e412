// sync_copy_pattern: NVIDIA bandwidthTest's --memory=pageable loop, as the
// project's own benchmark (docs/benchmarks.md, "Programs not written for
// cuxfer"). bench/run_sync_copy_pattern.sh runs it on pinned memory (the fair
// reference), on pageable memory without cuxfer and under `cuxfer record
// --rewrite=pin`, and compares.
//
// Our own code, made to do what bandwidthTest does in that mode, step for
// step, because the rewrite's one-time costs (a buffer's first copies, CUPTI
// starting, cold caches) show in exactly this pattern:
//   - all H2D sizes first, then all D2H sizes (bandwidthTest's order);
//   - H2D: a fresh malloc'd source filled byte by byte, two 16 MiB malloc'd
//     "cache clear" buffers filled (and never used: bandwidthTest allocates
//     them, and they move glibc's heap and mmap threshold as its do);
//   - D2H: a fresh malloc'd source filled and copied to the device once
//     (untimed), the timed copies into another fresh malloc'd buffer that
//     nothing touched before the first copy;
//   - --iters (100) synchronous cudaMemcpy, each timed alone with the CPU
//     clock, and a memset of a --memset-size (256 MiB) buffer between copies
//     (cold caches; the buffer is malloc'd once and first touched by that
//     memset, as bandwidthTest's flush_buf);
//   - the figure bandwidthTest prints: bytes copied / summed copy times.
// No mallopt: glibc's dynamic mmap threshold decides, as in bandwidthTest,
// which buffers are fresh mappings and which come back from the heap.
//
// --host says where the buffers bandwidthTest mallocs come from:
//   pageable    malloc (bandwidthTest --memory=pageable)
//   pinned      cudaMallocHost: the same loop on pinned memory, the reference
//               the rewrite is measured against (bandwidthTest built with its
//               pageable buffers from cudaMallocHost)
//   registered  malloc, then cudaHostRegister of the timed buffer by the
//               program itself before the loop
//   registered_huge      the same, the buffer a 2 MiB-aligned mapping with
//               MADV_HUGEPAGE before its first touch (transparent huge pages)
//   registered_portable  registered with cudaHostRegisterPortable, as the
//               rewrite registers (pinned for every context)
//   registered_collapse  registered, after MADV_COLLAPSE of the malloc'd
//               buffer's whole 2 MiB pages once filled (Linux 6.1+): what a
//               registrar could do to an app's buffer without moving it
// The three registered kinds say why registered memory DMAs slower than
// cudaMallocHost's at some sizes (the GPU's page size for the mapping?).
//
// One line per direction and size:
//   dir=<H2D|D2H> size=<B> host=<kind> iters=<n> mean_gbps=<x> first_us=<t1>,<t2>
//       rest_median_us=<x> rest_gbps=<x> data=<ok|BAD> copies_us=<t1>,...,<tn> [label=<text>]
// mean_gbps is bandwidthTest's figure (1e9 B/s); first_us the first two
// copies of the buffer, where one-time costs land (staging, registration,
// CUPTI's start); rest_* the median of the copies after those two. data: the
// D2H destination holds the source's bytes after the loop (H2D: always ok).
// Exit status: 0 measured; 77 no GPU; 1 a CUDA call failed or data=BAD;
// 2 bad arguments.
#include <cuda_runtime_api.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
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

constexpr size_t kCacheClearSize = size_t{16} << 20;  // bandwidthTest's CACHE_CLEAR_SIZE

struct Opts {
  std::string host = "pageable";
  int iters = 100;
  size_t memset_size = size_t{256} << 20;
  std::vector<size_t> sizes;
  std::string label;
};

void usage() {
  std::fprintf(stderr,
               "usage: sync_copy_pattern [--host pageable|pinned|registered|registered_portable|registered_huge|registered_collapse]\n"
               "                         [--iters N] [--memset-size N]\n"
               "                         [--label TEXT] [SIZE...]\n"
               "  SIZE             copy sizes (K/M/G suffixes; default 4M 32M 60M, bandwidthTest's\n"
               "                   --mode=range --start=4194304 --end=62914560 --increment=29360128)\n"
               "  --iters N        timed copies per size and direction (default 100)\n"
               "  --memset-size N  the buffer memset between copies (default 256M; 0: none)\n");
}

void* xmalloc(size_t size) {
  void* p = std::malloc(size);
  if (!p) {
    std::fprintf(stderr, "sync_copy_pattern: malloc(%zu) failed\n", size);
    std::exit(1);
  }
  return p;
}

constexpr size_t kHugePage = size_t{2} << 20;
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

bool is_registered_kind(const std::string& h) {
  return h == "registered" || h == "registered_huge" || h == "registered_collapse" || h == "registered_portable";
}

size_t huge_round(size_t size) { return (size + kHugePage - 1) / kHugePage * kHugePage; }

// A 2 MiB-aligned anonymous mapping that asks for transparent huge pages
// before anything touches it; the pointer is its start (freed by unmapping
// the rounded size).
void* huge_alloc(size_t size) {
  const size_t len = huge_round(size);
  void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    std::fprintf(stderr, "sync_copy_pattern: mmap(%zu) failed\n", len + kHugePage);
    std::exit(1);
  }
  const auto base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (base + kHugePage - 1) / kHugePage * kHugePage;
  if (start > base) munmap(raw, start - base);
  const uintptr_t end = base + len + kHugePage;
  if (end > start + len) munmap(reinterpret_cast<void*>(start + len), end - (start + len));
  if (madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE) != 0)
    std::fprintf(stderr, "sync_copy_pattern: MADV_HUGEPAGE: %s\n", std::strerror(errno));
  return reinterpret_cast<void*>(start);
}

// The buffers bandwidthTest mallocs in pageable mode (the cache-clear ones aside).
void* host_alloc(const Opts& o, size_t size) {
  void* p = nullptr;
  if (o.host == "pinned") CHECK(cudaMallocHost(&p, size));
  else if (o.host == "registered_huge") p = huge_alloc(size);
  else p = xmalloc(size);
  return p;
}

void host_free(const Opts& o, void* p, size_t size) {
  if (o.host == "pinned") CHECK(cudaFreeHost(p));
  else if (o.host == "registered_huge") munmap(p, huge_round(size));
  else std::free(p);
}

// MADV_COLLAPSE over the buffer's whole 2 MiB pages: the kernel copies their
// small pages into huge ones in place (same addresses, same bytes). Returns
// how many bytes it was asked to collapse, or -1 (errno said on stderr).
long long collapse(void* p, size_t size) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (b + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t end = (b + size) / kHugePage * kHugePage;
  if (end <= start) return 0;
  if (madvise(reinterpret_cast<void*>(start), end - start, MADV_COLLAPSE) != 0) {
    std::fprintf(stderr, "sync_copy_pattern: MADV_COLLAPSE: %s\n", std::strerror(errno));
    return -1;
  }
  return static_cast<long long>(end - start);
}

void fill(void* p, size_t n) {  // bandwidthTest's byte loop
  auto* b = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(i & 0xff);
}

// The writes to buffers nothing reads (the cache-clear buffers, the memset
// buffer) are the pattern: this keeps the compiler from dropping them.
void keep(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// One direction at one size, as bandwidthTest's testHostToDeviceTransfer /
// testDeviceToHostTransfer in pageable mode; prints the line.
bool run_case(const Opts& o, bool h2d, size_t size, char* flush) {
  // bandwidthTest creates and destroys two events per case (for its pinned
  // mode); the same calls here keep the driver calls around the loop alike.
  cudaEvent_t ev[2];
  CHECK(cudaEventCreate(&ev[0]));
  CHECK(cudaEventCreate(&ev[1]));
  void* src = host_alloc(o, size);  // H2D: the timed source; D2H: the device's initial data
  void* dst = h2d ? nullptr : host_alloc(o, size);
  void* clear[2] = {nullptr, nullptr};
  if (h2d) {
    clear[0] = xmalloc(kCacheClearSize);
    clear[1] = xmalloc(kCacheClearSize);
  }
  fill(src, size);
  if (h2d) {
    auto* c0 = static_cast<unsigned char*>(clear[0]);
    auto* c1 = static_cast<unsigned char*>(clear[1]);
    for (size_t i = 0; i < kCacheClearSize; ++i) {
      c0[i] = static_cast<unsigned char>(i & 0xff);
      c1[i] = static_cast<unsigned char>(0xff - (i & 0xff));
    }
    keep(c0);
    keep(c1);
  }
  void* dev = nullptr;
  CHECK(cudaMalloc(&dev, size));
  if (!h2d) CHECK(cudaMemcpy(dev, src, size, cudaMemcpyHostToDevice));
  void* timed = h2d ? src : dst;
  const bool reg = is_registered_kind(o.host);
  long long collapsed = 0;
  if (o.host == "registered_collapse" && !h2d) fill(timed, size);  // the pages must exist to collapse
  if (o.host == "registered_collapse") collapsed = collapse(timed, size);
  if (reg)
    CHECK(cudaHostRegister(timed, size,
                           o.host == "registered_portable" ? cudaHostRegisterPortable : cudaHostRegisterDefault));

  std::vector<double> us(static_cast<size_t>(o.iters));
  for (int i = 0; i < o.iters; ++i) {
    const double t0 = now_us();
    if (h2d) CHECK(cudaMemcpy(dev, src, size, cudaMemcpyHostToDevice));
    else CHECK(cudaMemcpy(dst, dev, size, cudaMemcpyDeviceToHost));
    us[static_cast<size_t>(i)] = now_us() - t0;
    if (flush) {
      std::memset(flush, i, o.memset_size);
      keep(flush);
    }
  }

  bool ok = true;
  if (!h2d) {
    const auto* b = static_cast<const unsigned char*>(dst);
    for (size_t i = 0; i < size && ok; ++i) ok = b[i] == static_cast<unsigned char>(i & 0xff);
  }
  double sum = 0;
  for (double t : us) sum += t;
  const std::vector<double> rest(us.begin() + std::min<ptrdiff_t>(2, o.iters), us.end());
  const double rest_med = median(rest);
  std::printf("dir=%s size=%zu host=%s iters=%d mean_gbps=%.3f first_us=%.1f,%.1f rest_median_us=%.1f "
              "rest_gbps=%.3f data=%s copies_us=",
              h2d ? "H2D" : "D2H", size, o.host.c_str(), o.iters,
              sum > 0 ? static_cast<double>(size) * o.iters / sum * 1e-3 : 0.0, us.empty() ? 0.0 : us[0],
              us.size() > 1 ? us[1] : 0.0, rest_med, rest_med > 0 ? static_cast<double>(size) / rest_med * 1e-3 : 0.0,
              ok ? "ok" : "BAD");
  for (size_t i = 0; i < us.size(); ++i) std::printf("%s%.1f", i ? "," : "", us[i]);
  if (o.host == "registered_collapse") std::printf(" collapsed=%lld", collapsed);
  std::printf("%s%s\n", o.label.empty() ? "" : " label=", o.label.c_str());
  std::fflush(stdout);

  if (reg) CHECK(cudaHostUnregister(timed));
  CHECK(cudaEventDestroy(ev[0]));
  CHECK(cudaEventDestroy(ev[1]));
  host_free(o, src, size);
  if (dst) host_free(o, dst, size);
  std::free(clear[0]);
  std::free(clear[1]);
  CHECK(cudaFree(dev));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  bench::g_program = "sync_copy_pattern";
  Opts o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    size_t v = 0;
    if (a == "--host") {
      o.host = next();
      if (o.host != "pageable" && o.host != "pinned" && !is_registered_kind(o.host)) {
        std::fprintf(stderr, "sync_copy_pattern: unknown --host '%s'\n", o.host.c_str());
        return 2;
      }
    } else if (a == "--iters") {
      o.iters = std::atoi(next().c_str());
    } else if (a == "--memset-size") {
      const std::string s = next();
      if (!parse_size(s, &o.memset_size)) {
        std::fprintf(stderr, "sync_copy_pattern: bad size '%s'\n", s.c_str());
        return 2;
      }
    } else if (a == "--label") {
      o.label = next();
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (parse_size(a, &v) && v > 0) {
      o.sizes.push_back(v);
    } else {
      usage();
      return 2;
    }
  }
  if (o.iters < 1) {
    usage();
    return 2;
  }
  if (o.sizes.empty()) o.sizes = {size_t{4} << 20, size_t{32} << 20, size_t{60} << 20};

  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < 1) {
    std::printf("sync_copy_pattern: no GPU (%s, %d device(s)): skipping\n",
                e == cudaSuccess ? "cudaSuccess" : cudaGetErrorName(e), count);
    return 77;
  }
  // bandwidthTest's flush_buf: malloc'd at start, first touched by the memset
  // after the first copy.
  char* flush = o.memset_size ? static_cast<char*>(xmalloc(o.memset_size)) : nullptr;
  // bandwidthTest asks for the device's properties first, and sets the device
  // (which creates the context) before each direction's sizes.
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  bool ok = true;
  for (bool h2d : {true, false}) {
    CHECK(cudaSetDevice(0));
    for (size_t s : o.sizes) ok = run_case(o, h2d, s, flush) && ok;
  }
  std::free(flush);
  return ok ? 0 : 1;
}
