// call_overhead: what one intercepted copy call costs, measured from the app's
// side. bench/run_call_overhead.sh runs it with and without libcuxfer.so
// preloaded and prints the difference; docs/benchmarks.md describes the method.
//
// The program links nothing from CUDA: it dlopen()s libcuda.so.1 and takes the
// copy functions through dlsym, the route JAX/XLA and Triton use, which the
// shim intercepts when preloaded. With LD_LIBRARY_PATH pointing at
// build/simcuda/lib the simulated driver answers, so this also runs on CI.
//
// Each case times N back-to-back 4-byte copies (one clock_gettime pair per
// call) and prints one line:
//   case=<name> n=<N> median_ns=<x> p99_ns=<y> mean_ns=<z>
//
// --evict MIB writes an unrelated MIB-MiB buffer before every timed call
// (untimed), so that each call starts with its data, code and page-table
// entries evicted from the caches and TLBs, as a call does after a training
// step's or bandwidthTest's memset: the cost a warm storm never shows.
// --mark stores 2i and 2i+1 into a global marker right before and after the
// i-th timed call and prints the marker's address first (`mark=0x...`), so a
// memory tracer can cut its trace into calls (devtools/pages_touched.py), and
// copies /proc/self/maps to stderr at the end so that it can name the objects.
// --toggle B is the in-process A/B (issue 13's bars, docs/benchmarks.md): each
// case's timed calls run in blocks of B calls that alternate off on on off ...
// between cuProfilerStop() and cuProfilerStart() (outside the blocks' time),
// so that under `cuxfer record --capture-range=cudaProfilerApi` (or
// CUXFER_CAPTURE_RANGE=cudaProfilerApi) only the "on" blocks are recorded.
// Each adjacent off/on pair gives recorded / unrecorded mean time a call, in
// the same process: what moves a whole process's speed on a shared host
// cancels. The case's line then adds
//   toggle_pairs=P on_mean_ns=A off_mean_ns=B paired_ratio=R paired_iqr=LO-HI pair_ratios=R1,...
// Without cuxfer the profiler calls change nothing: the same run is its own
// A/A control.
// Exit status: 0 measured; 77 no CUDA driver or device; 1 a CUDA call failed.
#include <cuda.h>
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using InitFn = CUresult (*)(unsigned);
using DeviceGetCountFn = CUresult (*)(int*);
using DeviceGetFn = CUresult (*)(CUdevice*, int);
using PrimaryCtxRetainFn = CUresult (*)(CUcontext*, CUdevice);
using PrimaryCtxReleaseFn = CUresult (*)(CUdevice);
using CtxSetCurrentFn = CUresult (*)(CUcontext);
using MemAllocFn = CUresult (*)(CUdeviceptr*, size_t);
using MemFreeFn = CUresult (*)(CUdeviceptr);
using MemAllocHostFn = CUresult (*)(void**, size_t);
using MemFreeHostFn = CUresult (*)(void*);
using StreamCreateFn = CUresult (*)(CUstream*, unsigned);
using StreamDestroyFn = CUresult (*)(CUstream);
using StreamSynchronizeFn = CUresult (*)(CUstream);
using HtoDFn = CUresult (*)(CUdeviceptr, const void*, size_t);
using DtoHFn = CUresult (*)(void*, CUdeviceptr, size_t);
using HtoDAsyncFn = CUresult (*)(CUdeviceptr, const void*, size_t, CUstream);
using ProfilerFn = CUresult (*)();

void* g_lib = nullptr;

template <typename Fn>
Fn sym(const char* name) {
  void* p = dlsym(g_lib, name);
  if (!p) {
    std::fprintf(stderr, "call_overhead: libcuda.so.1 has no %s\n", name);
    std::exit(77);
  }
  return reinterpret_cast<Fn>(p);
}

#define CHECK(call)                                                                 \
  do {                                                                              \
    CUresult r_ = (call);                                                           \
    if (r_ != CUDA_SUCCESS) {                                                       \
      std::fprintf(stderr, "call_overhead: %s failed: CUresult %d\n", #call, (int)r_); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Stats {
  double median, p99, mean;
};

Stats summarize(std::vector<uint64_t>& v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (uint64_t x : v) sum += static_cast<double>(x);
  auto at = [&](double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
    return static_cast<double>(v[std::min(i, v.size() - 1)]);
  };
  return {at(0.5), at(0.99), sum / static_cast<double>(v.size())};
}

void usage() {
  std::fprintf(stderr,
               "usage: call_overhead [-n N] [-w WARMUP] [--size BYTES] [--label TEXT]\n"
               "  -n N          timed calls per case (default 20000)\n"
               "  -w WARMUP     untimed calls before each case (default N/10)\n"
               "  --size BYTES  bytes per copy (default 4)\n"
               "  --label TEXT  added to every output line as mode=TEXT\n"
               "  --evict MIB   write an unrelated MIB-MiB buffer before every timed call (untimed)\n"
               "  --toggle B    blocks of B calls alternate between cuProfilerStop and\n"
               "                cuProfilerStart (off on on off ...): the in-process A/B under\n"
               "                --capture-range=cudaProfilerApi; prints the paired ratio\n"
               "  --case NAME   run only case NAME (repeatable; default all six)\n"
               "  --mark        store 2i / 2i+1 into a global marker around the i-th timed call\n"
               "                and print its address first, /proc/self/maps to stderr at the end\n"
               "                (for devtools/pages_touched.py)\n");
}

// The marker --mark writes around each timed call: volatile so that every
// store happens, in program order, where the tracer can see it.
volatile uint64_t g_mark = 0;

// Block b's kind under --toggle: off on on off, repeated, so that a linear
// drift cancels within each four.
bool recorded_block(size_t b) { return b % 4 == 1 || b % 4 == 2; }

// " toggle_pairs=... pair_ratios=..." from the blocks' mean ns a call.
std::string toggle_summary(const std::vector<double>& blocks) {
  std::vector<double> on, off, ratios;
  for (size_t b = 0; b < blocks.size(); ++b) (recorded_block(b) ? on : off).push_back(blocks[b]);
  // Adjacent pairs (0,1) and (2,3) of each four: off-on, then on-off.
  for (size_t b = 0; b + 1 < blocks.size(); b += 2)
    ratios.push_back(recorded_block(b) ? blocks[b] / blocks[b + 1] : blocks[b + 1] / blocks[b]);
  if (ratios.empty()) return " toggle_pairs=0";
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  };
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  const double lo = sorted[sorted.size() / 4], hi = sorted[std::min(sorted.size() - 1, 3 * sorted.size() / 4)];
  char head[256];
  std::snprintf(head, sizeof head,
                " toggle_pairs=%zu on_mean_ns=%.1f off_mean_ns=%.1f paired_ratio=%.4f paired_iqr=%.4f-%.4f",
                ratios.size(), median(on), median(off), median(ratios), lo, hi);
  std::string out = head;
  out += " pair_ratios=";
  for (size_t i = 0; i < ratios.size(); ++i) {
    char r[32];
    std::snprintf(r, sizeof r, "%s%.4f", i ? "," : "", ratios[i]);
    out += r;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 20000, warmup = SIZE_MAX, size = 4;
  size_t evict_mib = 0, toggle = 0;
  bool mark = false;
  std::string label;
  std::vector<std::string> only;  // --case: the cases to run (empty: all)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-n") n = std::strtoull(next(), nullptr, 10);
    else if (a == "-w") warmup = std::strtoull(next(), nullptr, 10);
    else if (a == "--size") size = std::strtoull(next(), nullptr, 10);
    else if (a == "--label") label = next();
    else if (a == "--evict") evict_mib = std::strtoull(next(), nullptr, 10);
    else if (a == "--mark") mark = true;
    else if (a == "--case") only.emplace_back(next());
    else if (a == "--toggle") toggle = std::strtoull(next(), nullptr, 10);
    else {
      usage();
      return a == "-h" || a == "--help" ? 0 : 2;
    }
  }
  if (n == 0 || size == 0 || (toggle && n < 4 * toggle)) {
    if (toggle && n < 4 * toggle) std::fprintf(stderr, "call_overhead: --toggle needs -n of at least four blocks\n");
    usage();
    return 2;
  }
  for (const std::string& c : only) {
    static const char* const kCases[] = {"htod_pinned",   "htod_pageable",     "dtoh_pinned",
                                         "dtoh_pageable", "htod_async_pinned", "htod_async_pageable"};
    if (std::find(std::begin(kCases), std::end(kCases), c) == std::end(kCases)) {
      std::fprintf(stderr, "call_overhead: unknown case '%s'\n", c.c_str());
      return 2;
    }
  }
  if (warmup == SIZE_MAX) warmup = n / 10;
  if (mark) {
    std::printf("mark=%p\n", static_cast<void*>(const_cast<uint64_t*>(&g_mark)));
    std::fflush(stdout);
  }
  std::vector<unsigned char> evict(evict_mib << 20);
  unsigned char evict_byte = 0;

  g_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!g_lib) {
    std::printf("call_overhead: no CUDA driver (%s): skipping\n", dlerror());
    return 77;
  }
  auto cuInit = sym<InitFn>("cuInit");
  auto cuDeviceGetCount = sym<DeviceGetCountFn>("cuDeviceGetCount");
  auto cuDeviceGet = sym<DeviceGetFn>("cuDeviceGet");
  auto cuDevicePrimaryCtxRetain = sym<PrimaryCtxRetainFn>("cuDevicePrimaryCtxRetain");
  auto cuDevicePrimaryCtxRelease = sym<PrimaryCtxReleaseFn>("cuDevicePrimaryCtxRelease_v2");
  auto cuCtxSetCurrent = sym<CtxSetCurrentFn>("cuCtxSetCurrent");
  auto cuMemAlloc = sym<MemAllocFn>("cuMemAlloc_v2");
  auto cuMemFree = sym<MemFreeFn>("cuMemFree_v2");
  auto cuMemAllocHost = sym<MemAllocHostFn>("cuMemAllocHost_v2");
  auto cuMemFreeHost = sym<MemFreeHostFn>("cuMemFreeHost");
  auto cuStreamCreate = sym<StreamCreateFn>("cuStreamCreate");
  auto cuStreamDestroy = sym<StreamDestroyFn>("cuStreamDestroy_v2");
  auto cuStreamSynchronize = sym<StreamSynchronizeFn>("cuStreamSynchronize");
  auto htod = sym<HtoDFn>("cuMemcpyHtoD_v2");
  auto dtoh = sym<DtoHFn>("cuMemcpyDtoH_v2");
  auto htod_async = sym<HtoDAsyncFn>("cuMemcpyHtoDAsync_v2");
  auto cuProfilerStart = sym<ProfilerFn>("cuProfilerStart");
  auto cuProfilerStop = sym<ProfilerFn>("cuProfilerStop");

  int count = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1) {
    std::printf("call_overhead: no GPU: skipping\n");
    return 77;
  }
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));

  CUdeviceptr d = 0;
  void* pinned = nullptr;
  CHECK(cuMemAlloc(&d, size));
  CHECK(cuMemAllocHost(&pinned, size));
  std::vector<unsigned char> pageable(size, 1);
  std::memset(pinned, 1, size);
  CUstream stream;
  CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

  std::vector<uint64_t> t(n);
  auto run_case = [&](const char* name, auto&& call) {
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) return;
    for (size_t i = 0; i < warmup; ++i) CHECK(call());
    CHECK(cuStreamSynchronize(stream));
    std::vector<double> blocks;  // --toggle: each block's mean ns a call
    uint64_t block_t0 = 0;
    for (size_t i = 0; i < n; ++i) {
      if (toggle && i % toggle == 0) {
        // Switch outside the block's time, and only when the kind changes.
        const size_t b = i / toggle;
        if (b == 0 || recorded_block(b) != recorded_block(b - 1))
          CHECK(recorded_block(b) ? cuProfilerStart() : cuProfilerStop());
        block_t0 = now_ns();
      }
      if (!evict.empty()) std::memset(evict.data(), ++evict_byte, evict.size());
      if (mark) g_mark = 2 * i;
      uint64_t t0 = now_ns();
      CUresult r = call();
      uint64_t t1 = now_ns();
      if (mark) g_mark = 2 * i + 1;
      if (r != CUDA_SUCCESS) {
        std::fprintf(stderr, "call_overhead: %s failed: CUresult %d\n", name, (int)r);
        std::exit(1);
      }
      t[i] = t1 - t0;
      // Keep the async queue short, outside the timed region.
      if ((i & 255) == 255) CHECK(cuStreamSynchronize(stream));
      if (toggle && (i + 1) % toggle == 0) {
        // The block's whole time, its clocks and stream syncs included: what
        // the program sees, of which the per-call figures above are a part.
        CHECK(cuStreamSynchronize(stream));
        blocks.push_back(static_cast<double>(now_ns() - block_t0) / static_cast<double>(toggle));
      }
    }
    CHECK(cuStreamSynchronize(stream));
    if (toggle) CHECK(cuProfilerStop());
    Stats s = summarize(t);
    std::string extra;
    if (!evict.empty()) extra += " evict_mib=" + std::to_string(evict_mib);
    if (!label.empty()) extra += " mode=" + label;
    if (toggle) extra += toggle_summary(blocks);
    std::printf("case=%s n=%zu median_ns=%.0f p99_ns=%.0f mean_ns=%.1f%s\n", name, n, s.median, s.p99,
                s.mean, extra.c_str());
    std::fflush(stdout);
  };

  void* pg = pageable.data();
  run_case("htod_pinned", [&] { return htod(d, pinned, size); });
  run_case("htod_pageable", [&] { return htod(d, pg, size); });
  run_case("dtoh_pinned", [&] { return dtoh(pinned, d, size); });
  run_case("dtoh_pageable", [&] { return dtoh(pg, d, size); });
  run_case("htod_async_pinned", [&] { return htod_async(d, pinned, size, stream); });
  run_case("htod_async_pageable", [&] { return htod_async(d, pg, size, stream); });

  CHECK(cuStreamDestroy(stream));
  CHECK(cuMemFreeHost(pinned));
  CHECK(cuMemFree(d));
  CHECK(cuDevicePrimaryCtxRelease(dev));
  if (mark) {
    if (FILE* maps = std::fopen("/proc/self/maps", "r")) {
      char line[4096];
      while (std::fgets(line, sizeof line, maps)) std::fputs(line, stderr);
      std::fclose(maps);
    }
  }
  return 0;
}
