// The addresses a thread's last stack capture read first, prefetched all at
// once at the start of its next capture.
//
// Both walks are chains of dependent loads: the native one reads a frame's
// rule, then its return address, then the next frame's rule; the Python one
// a frame, its code object, the code's table slot, then the previous frame.
// When the app has walked through its own memory between two copies (a
// training step's kernels, autograd, the optimizer), every link is a cache
// miss, and the misses of a chain are paid one after the other. A loop copies
// from the same few stacks again and again, so the last capture's addresses
// are very likely the next one's: prefetched together, the misses overlap.
//
// Only hints: a prefetch never faults and changes no result, so a stack that
// changed (or an address since unmapped) only wastes a few of them. Per
// thread, initial-exec TLS, no allocation.
#pragma once

#include <cstdint>

namespace cuxfer::shim {

class PrefetchTrail {
 public:
  enum Part : unsigned { kPython = 0, kNative = 1 };
  static constexpr uint32_t kPerPart = 32;  // addresses kept per walk (~7 Python frames, 16 native steps)

  // Prefetches what the last capture noted and forgets it: the capture that
  // follows notes its own.
  void replay() {
    for (unsigned p = 0; p < 2; ++p) {
      for (uint32_t i = 0; i < n_[p]; ++i) __builtin_prefetch(reinterpret_cast<const void*>(addr_[p][i]), 0, 3);
      n_[p] = 0;
    }
  }
  void note(Part p, uint64_t address) {
    if (n_[p] < kPerPart) addr_[p][n_[p]++] = address;
  }
  uint32_t size(Part p) const { return n_[p]; }
  uint64_t at(Part p, uint32_t i) const { return i < n_[p] ? addr_[p][i] : 0; }

 private:
  uint32_t n_[2] = {0, 0};
  uint64_t addr_[2][kPerPart] = {};
};

inline PrefetchTrail& prefetch_trail() {
  static thread_local PrefetchTrail trail __attribute__((tls_model("initial-exec")));
  return trail;
}

}  // namespace cuxfer::shim
