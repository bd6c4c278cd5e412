// rewrite_exactness [BIG=64M] [THREADS=8]
// Adversarial data checks for the pinned rewrite (CUXFER_REWRITE=pin): every
// copy's data is verified bit-exactly against a position-dependent pattern, so
// a rewrite that stages stale bytes, reads a reused address's old pages,
// returns before the source is consumed, reorders a stream or writes past a
// range fails the app itself. It must pass with and without the rewrite, on
// simulated CUDA and on a GPU.
//
// Cases (most sizes >= 256 KiB, the rewrite's default threshold; some below,
// which must pass through):
//   a  free then malloc (often the same address) with new contents; munmap then
//      mmap at the same address; madvise(MADV_DONTNEED) zeroing a range
//   b  async H2D from pageable, host buffer overwritten right after the call
//      returns (stream busy with earlier work): the device must get the OLD
//      bytes; on a created stream, the legacy default stream and
//      cudaStreamPerThread; async D2H into pageable read right after return
//   c  THREADS threads, each with its own buffers, on its own stream, on the
//      legacy default stream and on its per-thread default stream
//   d  host addresses offset by 1..7 bytes, odd sizes (1 MiB + 3 ...), odd device
//      offsets; guard bytes around every destination must stay untouched
//   e  a range from the middle of a BIG buffer into the middle of another
//   f  pinned, pageable, managed and registered memory mixed in one loop
//   g  ordering on one stream: H2D A->dev1, D2D dev1->dev2, H2D B->dev1 (write
//      after read), D2H dev2->host, D2H dev1->host; across streams through an
//      event; async H2D on a blocking stream then a legacy-stream cudaMemcpy
//   h  per-thread default stream (cudaStreamPerThread) in b, c and g
//   i  D2H into fresh, never-touched memory (mmap, malloc, new[])
//   j  registration in place (buffers copied twice): free/malloc, realloc,
//      munmap/mmap, MAP_FIXED, mremap, madvise under a registration; async
//      copies on registered buffers; heap neighbours sharing a page; the app
//      querying, registering and unregistering a buffer the rewrite registered;
//      fork with registrations live
//
// Output: one line per case ("case X ...: OK" or FAILED with the first
// mismatch), then "rewrite_exactness: checksum=<16 hex> bytes=<n>": a hash of
// every device->host result in a fixed order, identical across runs, with or
// without the rewrite (tests compare it). Exit 0 only if every check passed;
// 1 on a failure; 77 "no GPU".
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common.h"

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * 1024;
constexpr size_t kStageMin = 256 * KiB;  // the rewrite's default CUXFER_STAGE_MIN
constexpr unsigned char kGuard = 0xA5;
constexpr size_t kGuardLen = 64;

std::atomic<int> g_failures{0};

// --- position-dependent pattern -----------------------------------------------
// Byte j of pattern `seed` is byte (j % 8) of mix(seed, j / 8): any slice of a
// pattern can be verified on its own, at any alignment.
inline uint64_t mix(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void pattern(void* p, size_t n, uint64_t seed, size_t pos0 = 0) {
  auto* b = static_cast<unsigned char*>(p);
  size_t j = 0;
  while (j < n && (pos0 + j) % 8) {
    const size_t a = pos0 + j;
    b[j++] = static_cast<unsigned char>(mix(seed, a / 8) >> (8 * (a % 8)));
  }
  for (; j + 8 <= n; j += 8) {
    const uint64_t w = mix(seed, (pos0 + j) / 8);
    std::memcpy(b + j, &w, 8);  // little-endian: byte k of w is position +k
  }
  for (; j < n; ++j) {
    const size_t a = pos0 + j;
    b[j] = static_cast<unsigned char>(mix(seed, a / 8) >> (8 * (a % 8)));
  }
}

// SIZE_MAX when p[0..n) is pattern `seed` from position pos0, else the first bad index.
size_t mismatch(const void* p, size_t n, uint64_t seed, size_t pos0 = 0) {
  const auto* b = static_cast<const unsigned char*>(p);
  unsigned char tmp[4096];
  for (size_t off = 0; off < n; off += sizeof tmp) {
    const size_t len = std::min(sizeof tmp, n - off);
    pattern(tmp, len, seed, pos0 + off);
    if (std::memcmp(tmp, b + off, len) != 0)
      for (size_t k = 0; k < len; ++k)
        if (tmp[k] != b[off + k]) return off + k;
  }
  return SIZE_MAX;
}

size_t mismatch_byte(const void* p, size_t n, unsigned char v) {
  const auto* b = static_cast<const unsigned char*>(p);
  for (size_t k = 0; k < n; ++k)
    if (b[k] != v) return k;
  return SIZE_MAX;
}

// --- checksum of every D2H result, in program order ---------------------------
struct Sum {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t bytes = 0;
  void add(const void* p, size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
      uint64_t w;
      std::memcpy(&w, b + j, 8);
      h = (h ^ w) * 0x100000001b3ull;
      h ^= h >> 29;
    }
    for (; j < n; ++j) h = (h ^ b[j]) * 0x100000001b3ull;
    h = (h ^ n) * 0x100000001b3ull;
    bytes += n;
  }
  void add(const Sum& o) {
    h = (h ^ o.h) * 0x100000001b3ull;
    bytes += o.bytes;
  }
};

// One case's bookkeeping: failures are reported with their place and counted,
// the case goes on (so one run shows every broken case).
struct Case {
  Case(const char* n, Sum* s) : name(n), sum(s) {}
  const char* name;
  Sum* sum;
  int checks = 0, failed = 0;
  std::mutex mu;

  // Verify a D2H result against the pattern, then add it to the checksum.
  void expect(const void* p, size_t n, uint64_t seed, const char* what, size_t pos0 = 0) {
    const size_t bad = mismatch(p, n, seed, pos0);
    std::lock_guard lk(mu);
    ++checks;
    if (bad != SIZE_MAX) fail_locked(what, n, bad);
    if (sum) sum->add(p, n);
  }
  void expect_byte(const void* p, size_t n, unsigned char v, const char* what, bool checksum = true) {
    const size_t bad = mismatch_byte(p, n, v);
    std::lock_guard lk(mu);
    ++checks;
    if (bad != SIZE_MAX) fail_locked(what, n, bad);
    if (sum && checksum) sum->add(p, n);
  }
  void fail_note(const char* what) {
    std::lock_guard lk(mu);
    ++checks;
    ++failed;
    std::fprintf(stderr, "case %s: %s\n", name, what);
  }
  void fail_locked(const char* what, size_t n, size_t bad) {
    ++failed;
    if (failed <= 10)
      std::fprintf(stderr, "case %s: %s: %zu bytes, first wrong byte at %zu\n", name, what, n, bad);
  }
  void report() {
    std::printf("case %s: %s (%d checks%s)\n", name, failed ? "FAILED" : "OK", checks,
                failed ? (", " + std::to_string(failed) + " failed").c_str() : "");
    std::fflush(stdout);
    if (failed) g_failures += failed;
  }
};

// A host buffer with guard bytes on both sides; data() is offset `off` bytes
// from a 64-byte boundary.
struct Guarded {
  std::unique_ptr<unsigned char[]> raw;
  size_t n, off;
  Guarded(size_t n_, size_t off_ = 0) : raw(new unsigned char[n_ + 2 * kGuardLen + 128]), n(n_), off(off_) {
    std::memset(base(), kGuard, n + 2 * kGuardLen + 128 - align_pad());
  }
  size_t align_pad() const { return (64 - reinterpret_cast<uintptr_t>(raw.get()) % 64) % 64; }
  unsigned char* base() { return raw.get() + align_pad(); }
  unsigned char* data() { return base() + kGuardLen + off; }
  void check_guards(Case& c, const char* what) {
    c.expect_byte(base(), kGuardLen + off, kGuard, what, false);
    c.expect_byte(data() + n, kGuardLen, kGuard, what, false);
  }
};

struct DevBuf {
  unsigned char* p = nullptr;
  explicit DevBuf(size_t n) { TA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), n)); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

size_t g_big = 64 * MiB;
int g_threads = 8;
DevBuf* g_busy_a = nullptr;  // BIG bytes each: D2D copies between them keep a stream busy
DevBuf* g_busy_b = nullptr;

// Queues a large D2D copy so that what follows on `s` has to wait for it.
void make_busy(cudaStream_t s) {
  TA_CHECK(cudaMemcpyAsync(g_busy_b->p, g_busy_a->p, g_big, cudaMemcpyDeviceToDevice, s));
}

// --- a: address reuse ----------------------------------------------------------
void case_a(Sum& sum) {
  Case c{"a free/malloc, munmap/mmap, madvise reuse", &sum};
  const size_t sizes[] = {300 * KiB, 1 * MiB, 4 * MiB + 5, 64 * KiB};
  const size_t max = 4 * MiB + 5;
  DevBuf d(max);
  int reused = 0;
  uint64_t seed = 100;
  for (size_t n : sizes) {
    void* prev_src = nullptr;
    for (int it = 0; it < 4; ++it, ++seed) {
      auto* src = static_cast<unsigned char*>(std::malloc(n));
      auto* dst = static_cast<unsigned char*>(std::malloc(n));
      TA_ASSERT(src && dst);
      if (src == prev_src) ++reused;
      prev_src = src;
      pattern(src, n, seed);
      TA_CHECK(cudaMemcpy(d.p, src, n, cudaMemcpyHostToDevice));
      TA_CHECK(cudaMemcpy(dst, d.p, n, cudaMemcpyDeviceToHost));
      c.expect(dst, n, seed, "malloc'd H2D + D2H");
      std::free(src);
      std::free(dst);
    }
  }

  // munmap + mmap of the same address with new contents (FACTS.md: a stale
  // registration would copy the old pages).
  const size_t n = 4 * MiB;
  const int prot = PROT_READ | PROT_WRITE;
  void* m = mmap(nullptr, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TA_ASSERT(m != MAP_FAILED);
  std::vector<unsigned char> out(n);
  for (int it = 0; it < 3; ++it, ++seed) {
    pattern(m, n, seed);
    TA_CHECK(cudaMemcpy(d.p, m, n, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpy(out.data(), d.p, n, cudaMemcpyDeviceToHost));
    c.expect(out.data(), n, seed, "mmap'd H2D");
    // D2H into the mapping too, then remap.
    TA_CHECK(cudaMemcpy(m, d.p, n, cudaMemcpyDeviceToHost));
    c.expect(m, n, seed, "D2H into mmap'd");
    TA_ASSERT(munmap(m, n) == 0);
    void* again = mmap(m, n, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (again == MAP_FAILED) again = mmap(nullptr, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TA_ASSERT(again != MAP_FAILED);
    if (again == m) ++reused;
    m = again;
  }
  // madvise(MADV_DONTNEED): the range reads back as zeros, without any unmap.
  pattern(m, n, seed);
  TA_CHECK(cudaMemcpy(d.p, m, n, cudaMemcpyHostToDevice));
  TA_CHECK(cudaMemcpy(out.data(), d.p, n, cudaMemcpyDeviceToHost));
  c.expect(out.data(), n, seed, "before madvise");
  TA_ASSERT(madvise(m, n, MADV_DONTNEED) == 0);
  TA_CHECK(cudaMemcpy(d.p, m, n, cudaMemcpyHostToDevice));
  TA_CHECK(cudaMemcpy(out.data(), d.p, n, cudaMemcpyDeviceToHost));
  c.expect_byte(out.data(), n, 0, "after madvise(DONTNEED): zeros");
  ++seed;
  pattern(static_cast<unsigned char*>(m) + n / 2, n / 2, seed);  // half new data, half zero pages
  TA_CHECK(cudaMemcpy(d.p, m, n, cudaMemcpyHostToDevice));
  TA_CHECK(cudaMemcpy(out.data(), d.p, n, cudaMemcpyDeviceToHost));
  c.expect_byte(out.data(), n / 2, 0, "after madvise: zero half");
  c.expect(out.data() + n / 2, n / 2, seed, "after madvise: rewritten half");
  munmap(m, n);
  std::printf("case a: %d of the allocations came back at the previous address\n", reused);
  c.report();
}

// --- b: async H2D returns only after the source is consumed ---------------------
void case_b(Sum& sum) {
  Case c{"b async H2D source overwritten after return", &sum};
  cudaStream_t named = nullptr;
  TA_CHECK(cudaStreamCreate(&named));
  struct S {
    cudaStream_t s;
    const char* name;
  } streams[] = {{named, "created stream"}, {0, "legacy default stream"}, {cudaStreamPerThread, "per-thread stream"}};
  const size_t sizes[] = {1 * MiB, 1 * MiB + 3, 16 * MiB, 64 * KiB, kStageMin};
  DevBuf d(4 * (16 * MiB));
  uint64_t seed = 200;
  for (const S& st : streams) {
    for (size_t n : sizes) {
      std::vector<unsigned char> h(n), chk(n);
      // One copy, stream busy with earlier work.
      pattern(h.data(), n, seed);
      make_busy(st.s);
      TA_CHECK(cudaMemcpyAsync(d.p, h.data(), n, cudaMemcpyHostToDevice, st.s));
      pattern(h.data(), n, seed + 1);  // the app may reuse its buffer at once
      TA_CHECK(cudaStreamSynchronize(st.s));
      TA_CHECK(cudaMemcpy(chk.data(), d.p, n, cudaMemcpyDeviceToHost));
      c.expect(chk.data(), n, seed, st.name);
      seed += 2;
      // Four queued copies from the same buffer, rewritten between the calls.
      make_busy(st.s);
      for (int k = 0; k < 4; ++k) {
        pattern(h.data(), n, seed + k);
        TA_CHECK(cudaMemcpyAsync(d.p + k * n, h.data(), n, cudaMemcpyHostToDevice, st.s));
      }
      std::memset(h.data(), 0, n);
      TA_CHECK(cudaStreamSynchronize(st.s));
      for (int k = 0; k < 4; ++k) {
        TA_CHECK(cudaMemcpy(chk.data(), d.p + k * n, n, cudaMemcpyDeviceToHost));
        c.expect(chk.data(), n, seed + k, st.name);
      }
      // Async D2H into pageable memory is complete when the call returns:
      // read it without synchronising.
      std::memset(chk.data(), 0, n);
      make_busy(st.s);
      TA_CHECK(cudaMemcpyAsync(chk.data(), d.p + 2 * n, n, cudaMemcpyDeviceToHost, st.s));
      c.expect(chk.data(), n, seed + 2, "async D2H into pageable, read right after return");
      TA_CHECK(cudaStreamSynchronize(st.s));
      seed += 4;
    }
  }
  TA_CHECK(cudaStreamDestroy(named));
  c.report();
}

// --- c: threads -------------------------------------------------------------------
void case_c(Sum& sum) {
  Case c{"c threads with own buffers and streams", nullptr};
  const int nt = g_threads;
  std::vector<Sum> sums(static_cast<size_t>(nt));
  std::latch start(nt);
  std::vector<std::thread> threads;
  for (int t = 0; t < nt; ++t) {
    threads.emplace_back([&, t] {
      const size_t sizes[] = {64 * KiB, kStageMin + static_cast<size_t>(t), 1 * MiB + 3 * static_cast<size_t>(t),
                              2 * MiB + 7};
      const size_t max = 2 * MiB + 7 + 64;
      DevBuf d(max);
      cudaStream_t own = nullptr;
      TA_CHECK(cudaStreamCreateWithFlags(&own, t % 2 ? cudaStreamNonBlocking : cudaStreamDefault));
      std::vector<unsigned char> h(max), out(max);
      Case local{"c", &sums[static_cast<size_t>(t)]};
      start.arrive_and_wait();
      for (int it = 0; it < 6; ++it) {
        const size_t n = sizes[static_cast<size_t>(it + t) % 4];
        const uint64_t seed = 1000 + 100 * static_cast<uint64_t>(t) + static_cast<uint64_t>(it);
        cudaStream_t s = it % 3 == 0 ? own : it % 3 == 1 ? cudaStream_t{0} : cudaStreamPerThread;
        pattern(h.data(), n, seed);
        TA_CHECK(cudaMemcpyAsync(d.p, h.data(), n, cudaMemcpyHostToDevice, s));
        pattern(h.data(), n, seed + 50);
        TA_CHECK(cudaMemcpyAsync(out.data(), d.p, n, cudaMemcpyDeviceToHost, s));
        local.expect(out.data(), n, seed, "async round trip");
        TA_CHECK(cudaStreamSynchronize(s));
        // The same with synchronous copies (legacy default stream).
        TA_CHECK(cudaMemcpy(d.p, h.data(), n, cudaMemcpyHostToDevice));
        std::memset(out.data(), 0, n);
        TA_CHECK(cudaMemcpy(out.data(), d.p, n, cudaMemcpyDeviceToHost));
        local.expect(out.data(), n, seed + 50, "sync round trip");
      }
      TA_CHECK(cudaStreamDestroy(own));
      std::lock_guard lk(c.mu);
      c.checks += local.checks;
      c.failed += local.failed;
    });
  }
  for (auto& th : threads) th.join();
  for (const Sum& s : sums) sum.add(s);
  c.report();
}

// --- d: unaligned addresses, odd sizes -------------------------------------------
void case_d(Sum& sum) {
  Case c{"d unaligned host addresses and odd sizes", &sum};
  const size_t max = 4 * MiB + 7 * 13 + 8;
  DevBuf d(max + 16);
  uint64_t seed = 300;
  for (size_t off = 1; off <= 7; ++off) {
    const size_t sizes[] = {1 * MiB + 3, kStageMin + off, 4 * MiB + off * 13, kStageMin - off};
    for (size_t n : sizes) {
      for (int async = 0; async < 2; ++async, ++seed) {
        Guarded src(n, off), dst(n, 8 - off);
        pattern(src.data(), n, seed);
        unsigned char* dp = d.p + off;  // odd device address too
        if (async) {
          TA_CHECK(cudaMemcpyAsync(dp, src.data(), n, cudaMemcpyHostToDevice, 0));
          TA_CHECK(cudaMemcpyAsync(dst.data(), dp, n, cudaMemcpyDeviceToHost, 0));
          TA_CHECK(cudaStreamSynchronize(0));
        } else {
          TA_CHECK(cudaMemcpy(dp, src.data(), n, cudaMemcpyHostToDevice));
          TA_CHECK(cudaMemcpy(dst.data(), dp, n, cudaMemcpyDeviceToHost));
        }
        c.expect(dst.data(), n, seed, async ? "async unaligned" : "sync unaligned");
        dst.check_guards(c, "guard bytes around the D2H destination");
        src.check_guards(c, "guard bytes around the H2D source");
      }
    }
  }
  c.report();
}

// --- e: a range from the middle of a large buffer ---------------------------------
void case_e(Sum& sum) {
  Case c{"e ranges straddling the middle of a large buffer", &sum};
  const size_t big = g_big;
  std::vector<unsigned char> src(big), dst(big);
  pattern(src.data(), big, 400);
  const size_t starts[] = {big / 4 + 5, big / 2 - MiB / 2 - 1, 4093};
  const size_t lens[] = {big / 8 + 11, MiB + 1, big / 2 + 3};
  DevBuf d(big);
  TA_CHECK(cudaMemset(d.p, 0x3c, big));
  for (int k = 0; k < 3; ++k) {
    const size_t a = starts[k], n = lens[k];
    TA_ASSERT(a + n <= big);
    pattern(dst.data(), big, 401 + static_cast<uint64_t>(k));
    // H2D from the middle of src to the same offset on the device, D2H back to
    // the same offset of dst: only [a, a+n) of dst may change.
    TA_CHECK(cudaMemcpy(d.p + a, src.data() + a, n, cudaMemcpyHostToDevice));
    TA_CHECK(cudaMemcpy(dst.data() + a, d.p + a, n, cudaMemcpyDeviceToHost));
    c.expect(dst.data(), a, 401 + static_cast<uint64_t>(k), "bytes before the range untouched");
    c.expect(dst.data() + a, n, 400, "the range", a);
    c.expect(dst.data() + a + n, big - a - n, 401 + static_cast<uint64_t>(k), "bytes after the range untouched",
             a + n);
    // The device bytes around the range are untouched as well.
    std::vector<unsigned char> edge(4096);
    const size_t before = std::min<size_t>(a, 4096);
    TA_CHECK(cudaMemcpy(edge.data(), d.p + a - before, before, cudaMemcpyDeviceToHost));
    if (k == 0) c.expect_byte(edge.data(), before, 0x3c, "device bytes before the first range");
  }
  // Async, from the middle, with the source overwritten after return.
  const size_t a = big / 3 + 1, n = big / 4 + 9;
  TA_CHECK(cudaMemcpyAsync(d.p + 7, src.data() + a, n, cudaMemcpyHostToDevice, cudaStreamPerThread));
  std::memset(src.data() + a, 0, n);
  TA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
  TA_CHECK(cudaMemcpy(dst.data(), d.p + 7, n, cudaMemcpyDeviceToHost));
  c.expect(dst.data(), n, 400, "async range, source overwritten", a);
  c.report();
}

// --- f: pinned, pageable, managed, registered in one loop -------------------------
void case_f(Sum& sum) {
  Case c{"f pinned/pageable/managed/registered mixed", &sum};
  const size_t n = 1 * MiB + 64;
  enum { kPinned, kPageable, kManaged, kRegistered, kKinds };
  const char* names[] = {"pinned", "pageable", "managed", "registered"};
  unsigned char* mem[kKinds][2];
  for (int side = 0; side < 2; ++side) {
    TA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&mem[kPinned][side]), n));
    mem[kPageable][side] = static_cast<unsigned char*>(std::malloc(n));
    TA_CHECK(cudaMallocManaged(reinterpret_cast<void**>(&mem[kManaged][side]), n, cudaMemAttachGlobal));
    // aligned_alloc's size must be a multiple of the alignment (C11; ASan enforces it).
    mem[kRegistered][side] = static_cast<unsigned char*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096));
    TA_ASSERT(mem[kPageable][side] && mem[kRegistered][side]);
    TA_CHECK(cudaHostRegister(mem[kRegistered][side], n, cudaHostRegisterDefault));
  }
  DevBuf d(n);
  cudaStream_t s = nullptr;
  TA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  uint64_t seed = 500;
  char what[96];
  for (int it = 0; it < 2; ++it) {
    for (int from = 0; from < kKinds; ++from) {
      for (int to = 0; to < kKinds; ++to, ++seed) {
        unsigned char* src = mem[from][0];
        unsigned char* dst = mem[to][1];
        const size_t len = (it == 0) ? n : n - 64 + static_cast<size_t>(from * 4 + to);  // odd lengths too
        pattern(src, len, seed);
        std::memset(dst, 0, len);
        // Managed memory is copied with cudaMemcpyDefault (unified addressing).
        const cudaMemcpyKind h2d = from == kManaged ? cudaMemcpyDefault : cudaMemcpyHostToDevice;
        const cudaMemcpyKind d2h = to == kManaged ? cudaMemcpyDefault : cudaMemcpyDeviceToHost;
        if ((from + to + it) % 2) {
          TA_CHECK(cudaMemcpyAsync(d.p, src, len, h2d, s));
          // A pageable source is consumed when the call returns: overwrite it.
          // (Pinned, registered and managed ones may still be read by the DMA.)
          if (from == kPageable) pattern(src, len, seed + 7000);
          TA_CHECK(cudaMemcpyAsync(dst, d.p, len, d2h, s));
          TA_CHECK(cudaStreamSynchronize(s));
        } else {
          TA_CHECK(cudaMemcpy(d.p, src, len, h2d));
          TA_CHECK(cudaMemcpy(dst, d.p, len, d2h));
        }
        std::snprintf(what, sizeof what, "%s -> device -> %s (%s)", names[from], names[to],
                      (from + to + it) % 2 ? "async" : "sync");
        c.expect(dst, len, seed, what);
      }
    }
  }
  TA_CHECK(cudaStreamDestroy(s));
  for (int side = 0; side < 2; ++side) {
    TA_CHECK(cudaFreeHost(mem[kPinned][side]));
    std::free(mem[kPageable][side]);
    TA_CHECK(cudaFree(mem[kManaged][side]));
    TA_CHECK(cudaHostUnregister(mem[kRegistered][side]));
    std::free(mem[kRegistered][side]);
  }
  c.report();
}

// --- g: stream order ------------------------------------------------------------
void case_g(Sum& sum) {
  Case c{"g stream order H2D -> D2D -> D2H", &sum};
  cudaStream_t named = nullptr, other = nullptr, blocking = nullptr;
  TA_CHECK(cudaStreamCreateWithFlags(&named, cudaStreamNonBlocking));
  TA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  TA_CHECK(cudaStreamCreate(&blocking));
  const size_t sizes[] = {4 * MiB + 1, 1 * MiB, 128 * KiB};
  uint64_t seed = 600;
  for (size_t n : sizes) {
    DevBuf d1(n), d2(n);
    std::vector<unsigned char> a(n), b(n), h1(n), h2(n);
    for (cudaStream_t s : {named, cudaStream_t{0}, cudaStreamPerThread, blocking}) {
      pattern(a.data(), n, seed);
      pattern(b.data(), n, seed + 1);
      std::memset(h1.data(), 0, n);
      std::memset(h2.data(), 0, n);
      make_busy(s);
      TA_CHECK(cudaMemcpyAsync(d1.p, a.data(), n, cudaMemcpyHostToDevice, s));
      pattern(a.data(), n, seed + 2);
      TA_CHECK(cudaMemcpyAsync(d2.p, d1.p, n, cudaMemcpyDeviceToDevice, s));
      // Write after read: d1 gets new bytes only after the D2D has read it.
      TA_CHECK(cudaMemcpyAsync(d1.p, b.data(), n, cudaMemcpyHostToDevice, s));
      pattern(b.data(), n, seed + 3);
      TA_CHECK(cudaMemcpyAsync(h1.data(), d2.p, n, cudaMemcpyDeviceToHost, s));
      TA_CHECK(cudaMemcpyAsync(h2.data(), d1.p, n, cudaMemcpyDeviceToHost, s));
      TA_CHECK(cudaStreamSynchronize(s));
      c.expect(h1.data(), n, seed, "H2D -> D2D -> D2H");
      c.expect(h2.data(), n, seed + 1, "second H2D after the D2D read");
      seed += 4;
    }
    // Across streams through an event.
    cudaEvent_t ev = nullptr;
    TA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    pattern(a.data(), n, seed);
    make_busy(named);
    TA_CHECK(cudaMemcpyAsync(d1.p, a.data(), n, cudaMemcpyHostToDevice, named));
    TA_CHECK(cudaEventRecord(ev, named));
    TA_CHECK(cudaStreamWaitEvent(other, ev, 0));
    TA_CHECK(cudaMemcpyAsync(d2.p, d1.p, n, cudaMemcpyDeviceToDevice, other));
    TA_CHECK(cudaMemcpyAsync(h1.data(), d2.p, n, cudaMemcpyDeviceToHost, other));
    TA_CHECK(cudaStreamSynchronize(other));
    c.expect(h1.data(), n, seed, "H2D on one stream, event, D2D + D2H on another");
    TA_CHECK(cudaEventDestroy(ev));
    ++seed;
    // Async H2D on a blocking stream, then a synchronous cudaMemcpy (legacy
    // default stream, which waits for blocking streams).
    pattern(a.data(), n, seed);
    make_busy(blocking);
    TA_CHECK(cudaMemcpyAsync(d1.p, a.data(), n, cudaMemcpyHostToDevice, blocking));
    TA_CHECK(cudaMemcpy(h1.data(), d1.p, n, cudaMemcpyDeviceToHost));
    c.expect(h1.data(), n, seed, "async H2D on a blocking stream, then cudaMemcpy D2H");
    TA_CHECK(cudaStreamSynchronize(blocking));
    ++seed;
  }
  TA_CHECK(cudaStreamDestroy(named));
  TA_CHECK(cudaStreamDestroy(other));
  TA_CHECK(cudaStreamDestroy(blocking));
  c.report();
}

// --- i: D2H into fresh memory -----------------------------------------------------
void case_i(Sum& sum) {
  Case c{"i D2H into fresh never-touched memory", &sum};
  const size_t sizes[] = {kStageMin, 1 * MiB + 5, 16 * MiB};
  DevBuf d(16 * MiB + 5);
  uint64_t seed = 700;
  for (size_t n : sizes) {
    {
      std::vector<unsigned char> src(n);
      pattern(src.data(), n, seed);
      TA_CHECK(cudaMemcpy(d.p, src.data(), n, cudaMemcpyHostToDevice));
    }
    // mmap: pages that no one has touched.
    const size_t mlen = (n + 4095) / 4096 * 4096;
    void* m = mmap(nullptr, mlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TA_ASSERT(m != MAP_FAILED);
    TA_CHECK(cudaMemcpy(m, d.p, n, cudaMemcpyDeviceToHost));
    c.expect(m, n, seed, "sync D2H into fresh mmap");
    munmap(m, mlen);
    m = mmap(nullptr, mlen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TA_ASSERT(m != MAP_FAILED);
    TA_CHECK(cudaMemcpyAsync(m, d.p, n, cudaMemcpyDeviceToHost, 0));
    c.expect(m, n, seed, "async D2H into fresh mmap, read right after return");
    TA_CHECK(cudaStreamSynchronize(0));
    munmap(m, mlen);
    // malloc and new[]: uninitialised.
    void* p = std::malloc(n);
    TA_ASSERT(p);
    TA_CHECK(cudaMemcpy(p, d.p, n, cudaMemcpyDeviceToHost));
    c.expect(p, n, seed, "D2H into fresh malloc");
    std::free(p);
    std::unique_ptr<unsigned char[]> q(new unsigned char[n]);
    TA_CHECK(cudaMemcpyAsync(q.get(), d.p, n, cudaMemcpyDeviceToHost, cudaStreamPerThread));
    TA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    c.expect(q.get(), n, seed, "async D2H into fresh new[]");
    ++seed;
  }
  c.report();
}

}  // namespace

// --- j: registration in place ------------------------------------------------------
// Buffers of >= 1 MiB copied twice are registered by the rewrite
// (CUXFER_REGISTER=auto). Every way that memory can go away or change under a
// registration must leave the next copy with the new bytes.

// Two whole-buffer copies: enough for the rewrite to register the buffer.
void warm(unsigned char* h, size_t n, const DevBuf& d) {
  for (int k = 0; k < 2; ++k) TA_CHECK(cudaMemcpy(d.p, h, n, cudaMemcpyHostToDevice));
}

// H2D of `h` then D2H into `out`: the device must hold exactly pattern `seed`.
void round_trip(Case& c, unsigned char* h, size_t n, const DevBuf& d, std::vector<unsigned char>& out, uint64_t seed,
                const char* what) {
  TA_CHECK(cudaMemcpy(d.p, h, n, cudaMemcpyHostToDevice));
  std::memset(out.data(), 0, n);
  TA_CHECK(cudaMemcpy(out.data(), d.p, n, cudaMemcpyDeviceToHost));
  c.expect(out.data(), n, seed, what);
}

// simcuda can say whether a host address is still registered; a GPU cannot.
bool still_registered(const void* p) {
  using Fn = int (*)(const void*);
  static auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "simcuda_is_host_registered"));
  return fn && fn(p) != 0;
}

void case_j(Sum& sum) {
  Case c{"j registration: reuse, free, realloc, unmap, remap, madvise, fork", &sum};
  const size_t max = 24 * MiB;
  DevBuf d(max);
  std::vector<unsigned char> out(max);
  uint64_t seed = 900;
  const int prot = PROT_READ | PROT_WRITE;

  // free then malloc at the same address, new contents (heap and mmap'd blocks).
  for (size_t n : {1 * MiB + 100, 3 * MiB, 16 * MiB + 5}) {
    auto* a = static_cast<unsigned char*>(std::malloc(n));
    pattern(a, n, seed);
    warm(a, n, d);
    round_trip(c, a, n, d, out, seed++, "registered malloc'd buffer");
    volatile uintptr_t freed = reinterpret_cast<uintptr_t>(a);  // only the address is used below
    std::free(a);  // invalidates the registration; the next copy unregisters it first
    auto* b = static_cast<unsigned char*>(std::malloc(n));
    pattern(b, n, seed);
    round_trip(c, b, n, d, out, seed++, "malloc after free of a registered buffer");
    if (still_registered(reinterpret_cast<const void*>(freed)))
      c.fail_note("a freed buffer is still registered after the next copy");
    // realloc: grow (may move) and shrink, new contents each time.
    warm(b, n, d);
    b = static_cast<unsigned char*>(std::realloc(b, n + 2 * MiB));
    pattern(b, n + 2 * MiB, seed);
    round_trip(c, b, n + 2 * MiB, d, out, seed++, "after realloc grow");
    b = static_cast<unsigned char*>(std::realloc(b, n / 2));
    pattern(b, n / 2, seed);
    round_trip(c, b, n / 2, d, out, seed++, "after realloc shrink");
    std::free(b);
  }

  // munmap, then mmap at the same address; MAP_FIXED over a registered
  // mapping; mremap; madvise(DONTNEED): the device must see the new pages.
  const size_t n = 8 * MiB;
  auto* m = static_cast<unsigned char*>(mmap(nullptr, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  TA_ASSERT(m != MAP_FAILED);
  pattern(m, n, seed);
  warm(m, n, d);
  round_trip(c, m, n, d, out, seed++, "registered mapping");
  TA_ASSERT(munmap(m, n) == 0);
  auto* m2 = static_cast<unsigned char*>(mmap(m, n, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0));
  if (m2 == MAP_FAILED) m2 = static_cast<unsigned char*>(mmap(nullptr, n, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  TA_ASSERT(m2 != MAP_FAILED);
  pattern(m2, n, seed);
  round_trip(c, m2, n, d, out, seed++, "mmap after munmap of a registered mapping");
  warm(m2, n, d);
  auto* m3 = static_cast<unsigned char*>(mmap(m2, n, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
  TA_ASSERT(m3 == m2);
  TA_CHECK(cudaMemcpy(d.p, m3, n / 2, cudaMemcpyHostToDevice));
  TA_CHECK(cudaMemcpy(out.data(), d.p, n / 2, cudaMemcpyDeviceToHost));
  c.expect_byte(out.data(), n / 2, 0, "MAP_FIXED over a registered mapping: fresh zero pages");
  pattern(m3, n, seed);
  warm(m3, n, d);
  auto* m4 = static_cast<unsigned char*>(mremap(m3, n, 2 * n, MREMAP_MAYMOVE));
  TA_ASSERT(m4 != MAP_FAILED);
  pattern(m4, 2 * n, seed + 1);
  round_trip(c, m4, 2 * n, d, out, seed + 1, "after mremap of a registered mapping");
  seed += 2;
  warm(m4, 2 * n, d);
  TA_ASSERT(madvise(m4, n, MADV_DONTNEED) == 0);
  TA_CHECK(cudaMemcpy(d.p, m4, n, cudaMemcpyHostToDevice));
  TA_CHECK(cudaMemcpy(out.data(), d.p, n, cudaMemcpyDeviceToHost));
  c.expect_byte(out.data(), n, 0, "madvise(DONTNEED) on a registered mapping: zeros");
  munmap(m4, 2 * n);

  // Async copies on a registered buffer keep pageable semantics: H2D sources
  // may be overwritten at once, D2H destinations are complete on return.
  cudaStream_t st = nullptr;
  TA_CHECK(cudaStreamCreate(&st));
  for (size_t k : {2 * MiB, 12 * MiB}) {
    auto* h = static_cast<unsigned char*>(std::malloc(k));
    pattern(h, k, seed);
    warm(h, k, d);
    make_busy(st);
    TA_CHECK(cudaMemcpyAsync(d.p, h, k, cudaMemcpyHostToDevice, st));
    pattern(h, k, seed + 1);  // overwrite at once
    TA_CHECK(cudaStreamSynchronize(st));
    TA_CHECK(cudaMemcpy(out.data(), d.p, k, cudaMemcpyDeviceToHost));
    c.expect(out.data(), k, seed, "async H2D from a registered buffer, source overwritten on return");
    TA_CHECK(cudaMemcpy(d.p, h, k, cudaMemcpyHostToDevice));
    std::memset(h, 0, k);
    make_busy(st);
    TA_CHECK(cudaMemcpyAsync(h, d.p, k, cudaMemcpyDeviceToHost, st));
    c.expect(h, k, seed + 1, "async D2H into a registered buffer, read on return");
    TA_CHECK(cudaStreamSynchronize(st));
    seed += 2;
    std::free(h);
  }
  TA_CHECK(cudaStreamDestroy(st));

  // Two heap neighbours sharing a page: each registered (or merged) and copied.
  {
    const size_t k = 1 * MiB + 2000;
    auto* x = static_cast<unsigned char*>(std::malloc(k));
    auto* y = static_cast<unsigned char*>(std::malloc(k));
    pattern(x, k, seed);
    pattern(y, k, seed + 1);
    warm(x, k, d);
    round_trip(c, y, k, d, out, seed + 1, "neighbour of a registered buffer");
    warm(y, k, d);
    round_trip(c, x, k, d, out, seed, "registered neighbours (x)");
    round_trip(c, y, k, d, out, seed + 1, "registered neighbours (y)");
    seed += 2;
    std::free(x);
    std::free(y);
  }

  // The app's own view: a buffer the rewrite registered still looks pageable,
  // and the app may register it itself.
  {
    const size_t k = 4 * MiB;
    auto* h = static_cast<unsigned char*>(std::malloc(k));
    auto* plain = static_cast<unsigned char*>(std::malloc(k));
    pattern(h, k, seed);
    warm(h, k, d);
    cudaPointerAttributes a{}, b{};
    TA_CHECK(cudaPointerGetAttributes(&a, h + 100));
    TA_CHECK(cudaPointerGetAttributes(&b, plain));
    if (a.type != b.type) c.fail_note("cudaPointerGetAttributes of a rewritten buffer differs from plain malloc");
    cudaError_t unreg = cudaHostUnregister(h);
    if (unreg == cudaSuccess) c.fail_note("cudaHostUnregister succeeded on memory the app never registered");
    (void)cudaGetLastError();
    TA_CHECK(cudaHostRegister(h, k, cudaHostRegisterDefault));
    round_trip(c, h, k, d, out, seed++, "after the app registered it itself");
    TA_CHECK(cudaHostUnregister(h));
    pattern(h, k, seed);
    round_trip(c, h, k, d, out, seed++, "after the app unregistered it");
    std::free(plain);
    std::free(h);
  }

  // fork with registrations live: the child sees and owns a copy of the data.
  {
    const size_t k = 6 * MiB;
    auto* h = static_cast<unsigned char*>(std::malloc(k));
    pattern(h, k, seed);
    warm(h, k, d);
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      bool ok = mismatch(h, k, seed, 0) == SIZE_MAX;
      pattern(h, k, seed + 1);  // must not reach the parent
      _exit(ok ? 0 : 3);
    }
    TA_ASSERT(pid > 0);
    int status = 0;
    TA_ASSERT(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) c.fail_note("forked child did not see the registered buffer's data");
    c.expect(h, k, seed, "parent's registered buffer after the child wrote its copy");
    round_trip(c, h, k, d, out, seed, "registered buffer after fork");
    seed += 2;
    std::free(h);
  }
  c.report();
}

int main(int argc, char** argv) {
  g_big = testapp::arg_size(argc, argv, 1, 64 * MiB);
  g_threads = static_cast<int>(testapp::arg_size(argc, argv, 2, 8));
  TA_ASSERT(g_big >= 8 * MiB && g_threads >= 1);
  testapp::require_gpu("rewrite_exactness");
  DevBuf busy_a(g_big), busy_b(g_big);
  g_busy_a = &busy_a;
  g_busy_b = &busy_b;
  TA_CHECK(cudaMemset(busy_a.p, 0x11, g_big));

  Sum sum;
  case_a(sum);
  case_b(sum);
  case_c(sum);
  case_d(sum);
  case_e(sum);
  case_f(sum);
  case_g(sum);
  case_i(sum);
  case_j(sum);
  TA_CHECK(cudaDeviceSynchronize());

  std::printf("rewrite_exactness: checksum=%016llx bytes=%zu\n", static_cast<unsigned long long>(sum.h), sum.bytes);
  if (g_failures.load() != 0) {
    std::printf("rewrite_exactness: FAILED (%d check(s))\n", g_failures.load());
    return 1;
  }
  testapp::done("rewrite_exactness");
  return 0;
}
