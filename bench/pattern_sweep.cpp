// pattern_sweep: "never slower", as a benchmark (issue 12). Every combination
// of copy size, sync/async, direction, host-buffer pattern and stream, timed
// the way a user times it, so that bench/run_pattern_sweep.sh can run it
// without cuxfer, with the observe-only shim and with CUXFER_REWRITE=pin, and
// flag every cell the shim makes slower. docs/benchmarks.md ("Pattern sweep")
// describes the method and the bars.
//
// Runtime API only (cudaMemcpy, cudaMemcpyAsync, cudaMalloc, cudaMallocHost,
// cudaStreamCreate, events), no kernel: it builds as plain C++ against the real
// shared cudart (bench/pattern_sweep) or the simulated one (bench/pattern_sweep-sim,
// tests/simcuda, where the numbers mean nothing but every cell and every data
// check runs).
//
// Dimensions (one cell per combination; --only selects a subset):
//   size    4 B, 4 KiB, 64 KiB, 1 MiB, 4 MiB, 64 MiB, 256 MiB (capped by --max-size)
//   sync    sync:  legacy   cudaMemcpy
//                  ptds     cudaMemcpy_ptds (what cudaMemcpy is under nvcc
//                           --default-stream per-thread)
//                  idle/busy cudaMemcpyAsync(stream) + cudaStreamSynchronize(stream),
//                           one timed unit (PyTorch's non_blocking=False copy)
//           async: cudaMemcpyAsync(stream)
//   dir     H2D, D2H
//   host    fresh         a new malloc per copy (>= 128 KiB: a fresh mmap, as in
//                         rewrite_bandwidth: mallopt(M_MMAP_THRESHOLD)); H2D
//                         sources are filled first, D2H destinations left untouched
//           reused        malloc'd once per cell; between copies the app writes
//                         only one 8-byte stamp per 64 KiB (and the last word),
//                         so each rep's data differ while the buffer is
//                         otherwise untouched
//           reused_write  malloc'd once per cell; the app writes the whole buffer
//                         between copies (H2D: the new data; D2H: junk that the
//                         copy must overwrite)
//           reused_memset as reused, plus a memset of an unrelated 256 MiB
//                         buffer between copies (--memset-size), as NVIDIA's
//                         bandwidthTest does
//           pinned        cudaMallocHost (one buffer for the whole run), stamped
//                         like reused: the reference the rewrite is compared
//                         with in the same process, and the copies the rewrite
//                         must leave alone
//   stream  legacy (0), ptds (cudaStreamPerThread), idle (a created stream with
//           nothing queued), busy (a created stream with device work queued
//           ahead of the copy)
//
// The busy stream: device-to-device cudaMemcpyAsync chunks of up to 256 MiB
// (two buffers of max(16 MiB, min(256 MiB, 4 x --max-size))), enqueued right
// before the timed copy, lasting max(--busy-us, size / 25 GB/s) — at least
// twice the pinned DMA time of the copy itself (256 MiB: ~10.7 ms, 64 MiB:
// ~2.7 ms, <= 4 MiB: 200 us) — at the device-to-device bandwidth measured at
// start-up. Why copies and not cudaLaunchHostFunc with a sleep: a device copy
// is GPU work, as the kernels that keep real streams busy are: the stream's
// timeline (and so the events around the timed copy) advances on the GPU, no
// driver callback thread sleeps beside the shim's staging threads, and the
// duration follows from the measured bandwidth (a host function's wake-up
// latency would add its own noise). Why not a 256 MiB copy once: on an H200
// one 256 MiB DtoD copy takes only ~0.1-0.2 ms (HBM, not PCIe), so the length
// is made by enqueueing as many chunks as the target needs (at most 512).
// On the simulated CUDA a device copy runs inside the enqueue call: the stream
// is never actually busy there.
//
// Timing, per rep: the data are prepared and the device synchronised; busy
// work is enqueued (busy stream); then
//   [cudaEventRecord(ev0, s)] t0 copy t1 [cudaEventRecord(ev1, s)]
//   cudaStreamSynchronize(s) t2
//   call_us = t1 - t0  (the caller's clock: what a user measures; for async,
//                       the time until the call returns)
//   done_us = t2 - t0  (until a stream sync after the call has returned: the
//                       data are complete; on the busy stream this includes
//                       the queued work, which no copy can avoid)
//   event_us = ev1 - ev0 on the copy's stream (GPU side; on the busy stream it
//                       starts when the queued work ends, so it is the copy's own)
//   busy_us (busy cells only) = GPU time of the queued work (events around it)
// Below 1 MiB the events would add ~0.5 us to done_us, a noticeable share of a
// 6 us copy: there every other rep is timed by the clock alone (call_us,
// done_us) and the others by events (event_us, busy_us). From 1 MiB every rep
// has both. Medians over reps: by size 64 MiB / size clamped to 5..200
// (reused_memset cells at most 6: each rep also memsets 256 MiB; --reps N for
// all), after untimed warm-up reps: 2 for reused buffers (so that a rewrite
// that registers on reuse is measured once it has), 1 for pinned and for fresh
// buffers below 1 MiB (none from 1 MiB: each is a new mmap anyway).
// gbps = size / event_us.
//
// Data are checked in every rep of every cell: each rep's source holds a
// pattern distinct per cell, rep and position (H2D: the host buffer as above,
// the device destination poisoned with cudaMemset first; D2H: the device
// source written with a fresh pattern through a pinned buffer), and the whole
// destination is compared after the copy is complete (H2D: read back into a
// pinned buffer). A mismatch prints a `mismatch ...` line, the cell says
// check=FAIL and the program exits 1 at the end.
//
// Output, one line per cell:
//   cell size=<B> sync=<sync|async> dir=<H2D|D2H> host=<fresh|reused|reused_write|reused_memset|pinned>
//        stream=<legacy|ptds|idle|busy> call_us=<median> done_us=<median> event_us=<median>
//        gbps=<x> reps=<n> check=<ok|FAIL> [busy_us=<median>]
// framed by `# pattern_sweep: cells=<N> ...` and `# pattern_sweep: done cells=<N> mismatches=<M> seconds=<s>`.
// --list prints the selected cells (`cell size=... stream=...`) without touching CUDA.
//
// Exit status: 0 measured; 77 no GPU; 1 a CUDA call failed or data mismatched; 2 bad arguments.
//
// Run time of a full sweep (7 sizes, 560 cells) at default reps on an H200,
// estimated from ../shared/FACTS.md (pinned 55 GB/s and ~7-10 us for a small
// sync copy; pageable 7-12 GB/s; D2H into fresh pageable memory ~1.3 GB/s, its
// page faults) and this program's own per-rep work (fill and check at ~30 GB/s
// on 8 threads from 4 MiB, ~8 GB/s below; device sync, cudaMemset or the pinned
// upload of a D2H source, read-back of an H2D destination and events ~25 us;
// the 256 MiB memset ~15 ms; the busy stream's queued work):
//   4 B, 4 KiB, 64 KiB   ~3 s each  (64 cells x 200 reps x ~35-55 us, the busy
//                                    cells' 200 us of queued work, 16 memset
//                                    cells x 8 reps x 15 ms)
//   1 MiB, 4 MiB         ~4 s each
//   64 MiB               ~11 s      (80 cells x 5-7 reps x ~25 ms)
//   256 MiB              ~38 s      (80 cells x 5-7 reps x ~90 ms; fresh D2H
//                                    alone 8 cells x 5 x 0.2 s)
//   start-up             ~1 s       (context, 2 x 256 MiB cudaMallocHost, buffers)
// total ~65 s without cuxfer (with the rewrite the large pageable cells run
// faster), so 3 modes x 3 rounds take ~9-10 min: run_pattern_sweep.sh
// --first-round/--raw/--from splits the rounds across commands.
#include <cuda_runtime_api.h>
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

// cudaMemcpy under --default-stream per-thread; exported by every cudart
// (and by the simulated one), declared by cuda_runtime_api.h only in that mode.
extern "C" cudaError_t CUDARTAPI cudaMemcpy_ptds(void* dst, const void* src, size_t count, cudaMemcpyKind kind);

#include "bench_util.h"

namespace {

using bench::median;
using bench::now_us;
using bench::parse_size;

enum class Host { Fresh, Reused, ReusedWrite, ReusedMemset, Pinned };
enum class Strm { Legacy, Ptds, Idle, Busy };
const char* const kHostNames[] = {"fresh", "reused", "reused_write", "reused_memset", "pinned"};
const char* const kStreamNames[] = {"legacy", "ptds", "idle", "busy"};
constexpr Host kHosts[] = {Host::Fresh, Host::Reused, Host::ReusedWrite, Host::ReusedMemset, Host::Pinned};
constexpr Strm kStreams[] = {Strm::Legacy, Strm::Ptds, Strm::Idle, Strm::Busy};
constexpr size_t kSizes[] = {4, 4 << 10, 64 << 10, 1 << 20, 4 << 20, 64 << 20, size_t{256} << 20};
constexpr size_t kMiB = size_t{1} << 20;

struct Cell {
  size_t size;
  bool async;
  bool h2d;
  Host host;
  Strm stream;
  std::string key() const {
    char b[160];
    std::snprintf(b, sizeof b, "size=%zu sync=%s dir=%s host=%s stream=%s", size, async ? "async" : "sync",
                  h2d ? "H2D" : "D2H", kHostNames[static_cast<int>(host)], kStreamNames[static_cast<int>(stream)]);
    return b;
  }
};

// --only: "dim=v1,v2" restricts one dimension (size, sync, dir, host, stream);
// anything else is a regular expression searched in the cell's key.
struct Filter {
  std::vector<std::pair<std::string, std::vector<std::string>>> lists;
  std::vector<std::regex> res;
  bool accepts(const Cell& c) const {
    for (const auto& [dim, vals] : lists) {
      bool any = false;
      for (const auto& v : vals) {
        if (dim == "size") {
          size_t s = 0;
          any |= parse_size(v, &s) && s == c.size;
        } else if (dim == "sync") {
          any |= v == (c.async ? "async" : "sync");
        } else if (dim == "dir") {
          any |= v == (c.h2d ? "H2D" : "D2H") || v == (c.h2d ? "h2d" : "d2h");
        } else if (dim == "host") {
          any |= v == kHostNames[static_cast<int>(c.host)];
        } else if (dim == "stream") {
          any |= v == kStreamNames[static_cast<int>(c.stream)];
        }
      }
      if (!any) return false;
    }
    const std::string k = c.key();
    for (const auto& re : res)
      if (!std::regex_search(k, re)) return false;
    return true;
  }
};

struct Opts {
  size_t max_size = size_t{256} << 20;
  int reps = 0;  // 0: by size
  bool quick = false;
  bool list = false;
  size_t memset_size = size_t{256} << 20;
  double busy_us = 200;
  Filter only;
};

bool add_only(Filter& f, const std::string& spec) {
  static const std::regex list_re("^(size|sync|dir|host|stream)=([A-Za-z0-9_,]+)$");
  std::smatch m;
  if (std::regex_match(spec, m, list_re)) {
    std::vector<std::string> vals;
    std::string v = m[2];
    size_t p = 0;
    while (p <= v.size()) {
      size_t q = v.find(',', p);
      if (q == std::string::npos) q = v.size();
      if (q > p) vals.push_back(v.substr(p, q - p));
      p = q + 1;
    }
    f.lists.emplace_back(m[1], vals);
    return true;
  }
  try {
    f.res.emplace_back(spec, std::regex::extended);
  } catch (const std::regex_error&) {
    return false;
  }
  return true;
}

// Content: 8-byte words, distinct per seed and per word index; a partial last word
// takes the low bytes of its word.
inline uint64_t word(uint64_t w, uint64_t seed) {
  uint64_t x = (w + 1) * 0x9E3779B97F4A7C15ull ^ (seed * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull);
  return x ^ (x >> 29);
}
constexpr uint64_t kStampStrideWords = (64 << 10) / 8;  // one stamp per 64 KiB
inline bool is_stamp(uint64_t w, uint64_t last) { return w % kStampStrideWords == 0 || w == last; }

unsigned worker_count() {
  static const unsigned n = [] {
    unsigned hw = std::thread::hardware_concurrency();
    return std::clamp(hw / 2, 1u, 8u);
  }();
  return n;
}

// Runs fn(first_word, end_word) over [0, nwords), on worker threads from 4 MiB.
template <typename Fn>
void for_words(size_t bytes, Fn fn) {
  const uint64_t nw = (bytes + 7) / 8;
  const unsigned t = bytes >= 4 * kMiB ? worker_count() : 1;
  if (t <= 1) {
    fn(uint64_t{0}, nw);
    return;
  }
  std::vector<std::thread> th;
  const uint64_t per = (nw + t - 1) / t;
  for (unsigned i = 0; i < t; ++i) {
    const uint64_t a = i * per, b = std::min<uint64_t>(nw, a + per);
    if (a >= b) break;
    th.emplace_back([=] { fn(a, b); });
  }
  for (auto& x : th) x.join();
}

inline void store_word(unsigned char* p, size_t bytes, uint64_t w, uint64_t v) {
  const size_t off = w * 8;
  if (off + 8 <= bytes) std::memcpy(p + off, &v, 8);
  else std::memcpy(p + off, &v, bytes - off);
}
inline uint64_t load_word(const unsigned char* p, size_t bytes, uint64_t w) {
  const size_t off = w * 8;
  uint64_t v = 0;
  if (off + 8 <= bytes) std::memcpy(&v, p + off, 8);
  else std::memcpy(&v, p + off, bytes - off);
  return v;
}
inline uint64_t mask_for(size_t bytes, uint64_t w) {
  const size_t off = w * 8;
  return off + 8 <= bytes ? ~uint64_t{0} : (uint64_t{1} << (8 * (bytes - off))) - 1;
}

void fill(void* buf, size_t bytes, uint64_t seed) {
  auto* p = static_cast<unsigned char*>(buf);
  for_words(bytes, [=](uint64_t a, uint64_t b) {
    for (uint64_t w = a; w < b; ++w) store_word(p, bytes, w, word(w, seed));
  });
}

void stamp(void* buf, size_t bytes, uint64_t seed) {
  auto* p = static_cast<unsigned char*>(buf);
  const uint64_t nw = (bytes + 7) / 8;
  for (uint64_t w = 0; w < nw; w += kStampStrideWords) store_word(p, bytes, w, word(w, seed));
  store_word(p, bytes, nw - 1, word(nw - 1, seed));
}

// First mismatching byte offset, or -1. Stamp words (stamp_seed != 0) are
// expected with stamp_seed, all others with seed. From 4 MiB on worker threads,
// each over one contiguous range; the lowest range with a mismatch wins.
long long verify(const void* buf, size_t bytes, uint64_t seed, uint64_t stamp_seed, uint64_t* got, uint64_t* want) {
  const auto* p = static_cast<const unsigned char*>(buf);
  const uint64_t nw = (bytes + 7) / 8;
  const unsigned t = bytes >= 4 * kMiB ? worker_count() : 1;
  const uint64_t per = (nw + t - 1) / t;
  struct Found {
    long long off = -1;
    uint64_t got = 0, want = 0;
  };
  std::vector<Found> found(t);
  auto check = [&](unsigned k) {
    const uint64_t a = k * per, b = std::min<uint64_t>(nw, a + per);
    for (uint64_t w = a; w < b; ++w) {
      const uint64_t m = mask_for(bytes, w);
      const uint64_t e = (stamp_seed && is_stamp(w, nw - 1) ? word(w, stamp_seed) : word(w, seed)) & m;
      const uint64_t v = load_word(p, bytes, w) & m;
      if (v != e) {
        unsigned i = 0;
        while (i < 8 && ((v >> (8 * i)) & 0xff) == ((e >> (8 * i)) & 0xff)) ++i;
        found[k] = {static_cast<long long>(w * 8 + i), v, e};
        return;
      }
    }
  };
  if (t <= 1) {
    check(0);
  } else {
    std::vector<std::thread> th;
    for (unsigned k = 0; k < t; ++k) th.emplace_back(check, k);
    for (auto& x : th) x.join();
  }
  for (const Found& f : found)
    if (f.off >= 0) {
      *got = f.got;
      *want = f.want;
      return f.off;
    }
  return -1;
}

void usage() {
  std::fprintf(stderr,
               "usage: pattern_sweep [--max-size N] [--reps R] [--only SPEC]... [--quick] [--memset-size N]\n"
               "                     [--busy-us US] [--list]\n"
               "  --max-size N     largest copy size (K/M/G suffixes; default 256M)\n"
               "  --reps R         timed reps per cell (default: 64 MiB/size clamped to 5..200;\n"
               "                   reused_memset cells at most 6)\n"
               "  --only SPEC      dim=v1,v2 with dim one of size,sync,dir,host,stream (e.g.\n"
               "                   host=pinned,reused or size=4,64K), or a regular expression\n"
               "                   searched in 'size=<B> sync=.. dir=.. host=.. stream=..';\n"
               "                   repeatable, all must match\n"
               "  --quick          fewer reps (16 MiB/size clamped to 3..20, memset cells 3), one\n"
               "                   warm-up rep, a 64 MiB memset\n"
               "  --memset-size N  the unrelated memset of reused_memset cells (default 256M)\n"
               "  --busy-us US     shortest queued work on the busy stream (default 200)\n"
               "  --list           print the selected cells and exit (no CUDA)\n");
}

class Sweep {
 public:
  explicit Sweep(const Opts& o) : o_(o) {}

  void setup(size_t max_size) {
    CHECK(cudaEventCreate(&ev0_));
    CHECK(cudaEventCreate(&ev1_));
    CHECK(cudaEventCreate(&evb0_));
    CHECK(cudaStreamCreate(&idle_));
    CHECK(cudaStreamCreate(&busy_));
    CHECK(cudaMalloc(&dev_, max_size));
    CHECK(cudaMallocHost(&pinned_, max_size));
    CHECK(cudaMallocHost(&check_, max_size));
    std::memset(pinned_, 0, max_size);
    std::memset(check_, 0, max_size);
    chunk_ = std::max<size_t>(16 * kMiB, std::min<size_t>(256 * kMiB, 4 * max_size));
    CHECK(cudaMalloc(&busy_a_, chunk_));
    CHECK(cudaMalloc(&busy_b_, chunk_));
    CHECK(cudaMemset(busy_a_, 1, chunk_));
    CHECK(cudaMemset(busy_b_, 2, chunk_));
    if (need_memset_) {
      memset_buf_ = std::malloc(o_.memset_size);
      if (!memset_buf_) oom(o_.memset_size);
      std::memset(memset_buf_, 0, o_.memset_size);
    }
    // Device-to-device bandwidth, for the length of the busy stream's queued work.
    std::vector<double> us;
    for (int r = -1; r < 3; ++r) {
      CHECK(cudaEventRecord(evb0_, busy_));
      CHECK(cudaMemcpyAsync(busy_b_, busy_a_, chunk_, cudaMemcpyDeviceToDevice, busy_));
      CHECK(cudaEventRecord(ev1_, busy_));
      CHECK(cudaEventSynchronize(ev1_));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, evb0_, ev1_));
      if (r >= 0) us.push_back(std::max(1e-3, static_cast<double>(ms) * 1e3));
    }
    dtod_bytes_per_us_ = static_cast<double>(chunk_) / median(us);
    CHECK(cudaDeviceSynchronize());
  }

  void set_need_memset(bool b) { need_memset_ = b; }
  double dtod_gbps() const { return dtod_bytes_per_us_ * 1e-3; }
  size_t chunk() const { return chunk_; }
  int mismatches() const { return mismatches_; }

  int reps_for(const Cell& c) const {
    if (o_.reps > 0) return o_.reps;
    const size_t by_volume = (o_.quick ? 16 * kMiB : 64 * kMiB) / c.size;
    int r = static_cast<int>(std::clamp<size_t>(by_volume, o_.quick ? 3 : 5, o_.quick ? 20 : 200));
    if (c.host == Host::ReusedMemset) r = std::min(r, o_.quick ? 3 : 6);
    return r;
  }
  int warmup_for(const Cell& c) const {
    const bool reused = c.host == Host::Reused || c.host == Host::ReusedWrite || c.host == Host::ReusedMemset;
    if (c.host == Host::Fresh && c.size >= kMiB) return 0;  // every rep is a new mmap anyway
    if (o_.quick) return 1;
    return reused ? 2 : 1;
  }

  void run(const Cell& c, uint64_t cell_no) {
    const size_t n = c.size;
    const cudaMemcpyKind kind = c.h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    cudaStream_t s = nullptr;
    switch (c.stream) {
      case Strm::Legacy: s = nullptr; break;
      case Strm::Ptds: s = cudaStreamPerThread; break;
      case Strm::Idle: s = idle_; break;
      case Strm::Busy: s = busy_; break;
    }
    const bool named = c.stream == Strm::Idle || c.stream == Strm::Busy;
    const bool reused = c.host == Host::Reused || c.host == Host::ReusedWrite || c.host == Host::ReusedMemset;
    const uint64_t base_seed = cell_no * 1000003 + 7;

    void* host = nullptr;
    if (c.host == Host::Pinned) {
      host = pinned_;
    } else if (reused) {
      host = std::malloc(n);
      if (!host) oom(n);
    }
    if (host) fill(host, n, base_seed);  // touched, and the base content of stamped H2D sources

    const int reps = reps_for(c), warm = warmup_for(c);
    std::vector<double> call, done, event, busy;
    int bad_reps = 0;
    for (int r = -warm; r < reps; ++r) {
      const uint64_t seed = base_seed + static_cast<uint64_t>(r + warm) + 1;
      const bool both = r < 0 || n >= kMiB || reps == 1;
      const bool events = both || r % 2 == 1;
      const bool clock = both || r % 2 == 0;
      void* h = host;
      uint64_t want_seed = seed, want_stamp = 0;
      // Prepare the source and the destination.
      if (c.h2d) {
        if (c.host == Host::Fresh) {
          h = std::malloc(n);
          if (!h) oom(n);
          fill(h, n, seed);
        } else if (c.host == Host::ReusedWrite) {
          fill(h, n, seed);
        } else {
          stamp(h, n, seed);
          want_seed = base_seed;
          want_stamp = seed;
        }
        CHECK(cudaMemset(dev_, static_cast<int>(0xa5 ^ (r & 0xff)), n));
      } else {
        fill(check_, n, seed);
        CHECK(cudaMemcpy(dev_, check_, n, cudaMemcpyHostToDevice));
        if (c.host == Host::Fresh) {
          h = std::malloc(n);  // untouched: the copy takes the page faults
          if (!h) oom(n);
        } else if (c.host == Host::ReusedWrite) {
          fill(h, n, ~seed);  // the app writes the buffer; the copy must overwrite all of it
        }
      }
      if (c.host == Host::ReusedMemset) std::memset(memset_buf_, r & 0xff, o_.memset_size);
      CHECK(cudaDeviceSynchronize());
      if (c.stream == Strm::Busy) {
        if (events) CHECK(cudaEventRecord(evb0_, s));
        enqueue_busy(n, s);
      }
      if (events) CHECK(cudaEventRecord(ev0_, s));
      void* dst = c.h2d ? dev_ : h;
      const void* src = c.h2d ? h : dev_;
      double t0 = 0, t1 = 0;
      if (!c.async && c.stream == Strm::Legacy) {
        t0 = now_us();
        const cudaError_t e = cudaMemcpy(dst, src, n, kind);
        t1 = now_us();
        CHECK(e);
      } else if (!c.async && c.stream == Strm::Ptds) {
        t0 = now_us();
        const cudaError_t e = cudaMemcpy_ptds(dst, src, n, kind);
        t1 = now_us();
        CHECK(e);
      } else if (!c.async && named) {
        t0 = now_us();
        cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        t1 = now_us();
        CHECK(e);
      } else {
        t0 = now_us();
        const cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, s);
        t1 = now_us();
        CHECK(e);
      }
      if (events) CHECK(cudaEventRecord(ev1_, s));
      CHECK(cudaStreamSynchronize(s));
      const double t2 = now_us();
      float ms = 0, bms = 0;
      if (events) {
        CHECK(cudaEventElapsedTime(&ms, ev0_, ev1_));
        if (c.stream == Strm::Busy) CHECK(cudaEventElapsedTime(&bms, evb0_, ev0_));
      }
      // Check every byte of the destination.
      const void* got_buf = h;
      if (c.h2d) {
        CHECK(cudaMemcpy(check_, dev_, n, cudaMemcpyDeviceToHost));
        got_buf = check_;
      }
      uint64_t got = 0, want = 0;
      const long long off = verify(got_buf, n, want_seed, want_stamp, &got, &want);
      if (off >= 0) {
        ++bad_reps;
        if (bad_reps <= 3)
          std::printf("mismatch %s rep=%d offset=%lld got_word=%016llx want_word=%016llx\n", c.key().c_str(), r,
                      off, static_cast<unsigned long long>(got), static_cast<unsigned long long>(want));
      }
      if (c.host == Host::Fresh) std::free(h);
      if (r < 0) continue;
      if (clock) {
        call.push_back(t1 - t0);
        done.push_back(t2 - t0);
      }
      if (events) {
        event.push_back(static_cast<double>(ms) * 1e3);
        if (c.stream == Strm::Busy) busy.push_back(static_cast<double>(bms) * 1e3);
      }
    }
    if (reused) std::free(host);
    if (bad_reps) {
      ++mismatches_;
      std::fprintf(stderr, "pattern_sweep: data mismatch in %d of %d reps: %s\n", bad_reps, reps + warm,
                   c.key().c_str());
    }
    const double ev = median(event);
    std::printf("cell %s call_us=%.3f done_us=%.3f event_us=%.3f gbps=%.4g reps=%d check=%s", c.key().c_str(),
                median(call), median(done), ev, ev > 0 ? static_cast<double>(n) / ev * 1e-3 : 0.0, reps,
                bad_reps ? "FAIL" : "ok");
    if (c.stream == Strm::Busy) std::printf(" busy_us=%.1f", median(busy));
    std::printf("\n");
    std::fflush(stdout);
  }

 private:
  void enqueue_busy(size_t n, cudaStream_t s) {
    const double target_us = std::max(o_.busy_us, static_cast<double>(n) / 25e3);  // 25 GB/s = 25e3 B/us
    size_t bytes = static_cast<size_t>(target_us * dtod_bytes_per_us_);
    bytes = std::max<size_t>(bytes, 64 << 10);
    for (int k = 0; bytes > 0 && k < 512; ++k) {
      const size_t piece = std::min(bytes, chunk_);
      CHECK(cudaMemcpyAsync(k % 2 ? busy_a_ : busy_b_, k % 2 ? busy_b_ : busy_a_, piece, cudaMemcpyDeviceToDevice, s));
      bytes -= piece;
    }
  }
  [[noreturn]] static void oom(size_t size) {
    std::fprintf(stderr, "pattern_sweep: malloc(%zu) failed\n", size);
    std::exit(1);
  }

  const Opts& o_;
  cudaEvent_t ev0_ = nullptr, ev1_ = nullptr, evb0_ = nullptr;
  cudaStream_t idle_ = nullptr, busy_ = nullptr;
  void* dev_ = nullptr;
  void* pinned_ = nullptr;
  void* check_ = nullptr;
  void* busy_a_ = nullptr;
  void* busy_b_ = nullptr;
  void* memset_buf_ = nullptr;
  size_t chunk_ = 0;
  double dtod_bytes_per_us_ = 1;
  bool need_memset_ = false;
  int mismatches_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  bench::g_program = "pattern_sweep";
  Opts o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "pattern_sweep: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--max-size" || a == "--memset-size") {
      const std::string v = next();
      if (!parse_size(v, a == "--max-size" ? &o.max_size : &o.memset_size) ||
          (a == "--max-size" ? o.max_size : o.memset_size) == 0) {
        std::fprintf(stderr, "pattern_sweep: bad size '%s' for %s\n", v.c_str(), a.c_str());
        return 2;
      }
    } else if (a == "--reps") {
      const std::string v = next();
      char* end = nullptr;
      const long r = std::strtol(v.c_str(), &end, 10);
      if (end == v.c_str() || *end || r < 1 || r > 100000) {
        std::fprintf(stderr, "pattern_sweep: bad --reps '%s'\n", v.c_str());
        return 2;
      }
      o.reps = static_cast<int>(r);
    } else if (a == "--busy-us") {
      const std::string v = next();
      char* end = nullptr;
      o.busy_us = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end || !(o.busy_us >= 0 && o.busy_us <= 1e6)) {
        std::fprintf(stderr, "pattern_sweep: bad --busy-us '%s'\n", v.c_str());
        return 2;
      }
    } else if (a == "--only") {
      const std::string v = next();
      if (!add_only(o.only, v)) {
        std::fprintf(stderr, "pattern_sweep: bad --only '%s' (not dim=v1,v2 nor a regular expression)\n", v.c_str());
        return 2;
      }
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "pattern_sweep: unknown option '%s'\n", a.c_str());
      usage();
      return 2;
    }
  }
  if (o.quick && o.memset_size == (size_t{256} << 20)) o.memset_size = 64 * kMiB;

  std::vector<Cell> cells;
  for (size_t s : kSizes) {
    if (s > o.max_size) continue;
    for (bool async : {false, true})
      for (bool h2d : {true, false})
        for (Strm st : kStreams)
          for (Host h : kHosts) {
            Cell c{s, async, h2d, h, st};
            if (o.only.accepts(c)) cells.push_back(c);
          }
  }
  if (o.list) {
    for (const auto& c : cells) std::printf("cell %s\n", c.key().c_str());
    return 0;
  }
  if (cells.empty()) {
    std::fprintf(stderr, "pattern_sweep: no cell selected (--max-size %zu and --only)\n", o.max_size);
    return 2;
  }
  size_t max_size = 0;
  bool need_memset = false;
  for (const auto& c : cells) {
    max_size = std::max(max_size, c.size);
    need_memset |= c.host == Host::ReusedMemset;
  }

  // Every malloc >= 128 KiB is a fresh mmap, freed by munmap: "fresh" buffers
  // are new pages, and glibc's dynamic threshold does not move them onto the
  // heap after the first free.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);

  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count < 1) {
    std::printf("pattern_sweep: no GPU (%s, %d device(s)): skipping\n",
                e == cudaSuccess ? "cudaSuccess" : cudaGetErrorName(e), count);
    return 77;
  }
  const double t_start = now_us();
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // create the context outside any timing

  Sweep sw(o);
  sw.set_need_memset(need_memset);
  sw.setup(max_size);
  std::printf("# pattern_sweep: cells=%zu max_size=%zu memset=%zu busy_min_us=%.0f dtod_gbps=%.1f busy_chunk=%zu "
              "reps=%s%s\n",
              cells.size(), max_size, need_memset ? o.memset_size : size_t{0}, o.busy_us, sw.dtod_gbps(), sw.chunk(),
              o.reps > 0 ? std::to_string(o.reps).c_str() : "by-size", o.quick ? " quick" : "");
  std::fflush(stdout);
  uint64_t no = 0;
  for (const auto& c : cells) sw.run(c, ++no);
  std::printf("# pattern_sweep: done cells=%zu mismatches=%d seconds=%.1f\n", cells.size(), sw.mismatches(),
              (now_us() - t_start) * 1e-6);
  return sw.mismatches() ? 1 : 0;
}
