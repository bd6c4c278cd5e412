// The addresses a thread's last cold stack capture from a call site read
// first, prefetched all at once at the start of its next one.
//
// Both walks are chains of dependent loads: the native one reads a frame's
// rule, then its return address, then the next frame's rule; the Python one
// a frame, its code object, the code's table slot, then the previous frame.
// When the app has run between two copies (a training step's kernel launches,
// autograd, the optimizer), every link can be a cache miss, and the misses of
// a chain are paid one after the other. A loop copies from the same few
// stacks again and again, so what the last capture from the same place read
// is very likely what this one will read: prefetched together, the misses
// overlap instead of queueing.
//
// The prefetches are issued at the hook's entry (interpose/call_scope.h),
// the walks a few steps later.
//
// Only for cold captures: one that follows the thread's previous capture by
// more than kColdCycles of the time-stamp counter (the app ran in between).
// Back-to-back copies find their lines in cache; for them begin() is one
// rdtsc and a compare, and nothing is noted. Trails are kept per call site
// (the hook's return address, kTrails of them per thread, replaced round
// robin), so that a step's upload, its read-back and its memsets each
// prefetch their own stack.
//
// Only hints: a prefetch never faults and changes no result, so a stack that
// changed (or an address since unmapped) only wastes a few of them. Per
// thread (initial-exec TLS), no allocation, no lock.
#pragma once

#include <x86intrin.h>

#include <cstdint>

namespace cuxfer::shim {

class PrefetchTrail {
 public:
  enum Part : unsigned { kPython = 0, kNative = 1 };
  static constexpr uint32_t kPerPart = 32;  // addresses kept per walk (8 Python frames, 16 native steps)
  static constexpr uint32_t kTrails = 4;
  static constexpr uint64_t kColdCycles = 200'000;  // ~70-100 us at the usual TSC rates

  // At the start of a capture of a call made from `site`, at time-stamp
  // counter `tsc`. Cold: prefetches what the last cold capture from `site`
  // noted, and has this capture note in its place. Warm: notes nothing.
  void begin(uint64_t site, uint64_t tsc) {
    const bool cold = tsc - last_tsc_ > kColdCycles;
    last_tsc_ = tsc;
    current_ = kNone;
    if (!cold) return;
    unsigned t = kNone;
    for (unsigned i = 0; i < kTrails; ++i)
      if (sites_[i] == site) t = i;
    if (t != kNone) {
      const Trail& tr = trails_[t];
      for (unsigned p = 0; p < 2; ++p)
        for (uint32_t i = 0; i < tr.n[p]; ++i) __builtin_prefetch(reinterpret_cast<const void*>(tr.addr[p][i]), 0, 3);
    } else {
      t = next_;
      next_ = (next_ + 1) % kTrails;
      sites_[t] = site;
    }
    trails_[t].n[0] = trails_[t].n[1] = 0;
    current_ = t;
  }
  void begin(uint64_t site) { begin(site, __rdtsc()); }

  // Whether this capture notes its reads (a cold one).
  bool noting() const { return current_ != kNone; }
  void note(Part p, uint64_t address) {
    Writer w(*this, p);
    w.note(address);
  }

  // A walk's notes, counted in a register and stored once when it goes out
  // of scope (the walks return from many places). Appends to what the part
  // already holds; off when the capture is warm.
  class Writer {
   public:
    Writer(PrefetchTrail& t, Part p)
        : count_(t.current_ == kNone ? nullptr : &t.trails_[t.current_].n[p]),
          out_(count_ ? t.trails_[t.current_].addr[p] : nullptr),
          k_(count_ ? *count_ : kPerPart) {}
    ~Writer() {
      if (count_) *count_ = k_;
    }
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;
    bool on() const { return k_ < kPerPart; }
    void note(uint64_t address) {
      if (k_ < kPerPart) out_[k_++] = address;
    }

   private:
    uint32_t* count_;
    uint64_t* out_;
    uint32_t k_;
  };
  // What the current capture noted so far (tests).
  uint32_t size(Part p) const { return current_ == kNone ? 0 : trails_[current_].n[p]; }
  uint64_t at(Part p, uint32_t i) const { return i < size(p) ? trails_[current_].addr[p][i] : 0; }

 private:
  static constexpr unsigned kNone = ~0u;
  struct Trail {
    uint32_t n[2] = {0, 0};
    uint64_t addr[2][kPerPart] = {};
  };
  uint64_t last_tsc_ = 0;
  unsigned current_ = kNone;
  unsigned next_ = 0;
  uint64_t sites_[kTrails] = {};  // together: begin() compares them in one or two lines
  Trail trails_[kTrails];
};

inline PrefetchTrail& prefetch_trail() {
  static thread_local PrefetchTrail trail __attribute__((tls_model("initial-exec")));
  return trail;
}

}  // namespace cuxfer::shim
