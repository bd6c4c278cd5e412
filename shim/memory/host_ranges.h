// Host memory whose whole lifetime the shim observes: large malloc-family
// allocations and the app's own anonymous mmaps, seen through the libc hooks
// (interpose/libc_hooks.cpp). Only memory listed here may be registered in
// place by the pinned rewrite, because only here does the shim see every way
// the memory can go away (free, realloc, munmap, mremap, madvise, MAP_FIXED)
// before it does. Memory glibc or ld.so release internally without a PLT call
// (thread stacks, dlclose'd libraries, malloc's own heap trimming of free
// chunks) is never listed, so it is never registered: it is staged instead.
//
// Each range also counts the copies that used it, which is what the
// registration policy decides on (docs/architecture.md, "Pinned rewrite").
//
// Called from malloc/free hooks: no allocation, no system call, and a mutex
// that is never held across anything but a few array moves.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "core/ranked_lock.h"

namespace cuxfer::shim {

enum class HostSource : uint8_t { Malloc = 1, Mmap = 2 };

struct RegisterVerdict {
  bool tracked = false;       // [p, p+n) lies inside one observed range
  bool register_now = false;  // ... and the policy says to register that range now
  bool forbidden = false;     // ... which must never be registered (a registration failed there)
  uint64_t begin = 0, end = 0;
};

class HostRanges {
 public:
  static constexpr uint32_t kCapacity = 8192;

  // Starts observing [begin, begin+bytes) (replacing anything it overlaps:
  // that memory is gone). False when the table is full: the range stays unobserved.
  bool track(uint64_t begin, uint64_t bytes, HostSource source);
  // Forgets the range that starts exactly at `begin` (free, realloc). Returns
  // whether there was one, and its end in `*end`.
  bool untrack_exact(uint64_t begin, uint64_t* end);
  // Forgets every range overlapping [begin, end) (munmap, mremap, MAP_FIXED).
  // Returns how many. The bounds of what was forgotten widen `*lo`/`*hi`.
  uint32_t untrack_overlapping(uint64_t begin, uint64_t end, uint64_t* lo = nullptr, uint64_t* hi = nullptr);
  // The source of the range containing `p`, if observed (0 otherwise).
  HostSource source_of(uint64_t p) const;

  // A copy of [p, p+n) happened. The policy: a range is registered once the
  // copies that used it have moved at least twice its size, in two copies or
  // more, and it is not larger than `max_bytes` nor marked never-register.
  RegisterVerdict note_copy(uint64_t p, uint64_t n, uint64_t max_bytes);
  // Never register the ranges overlapping [begin, end) again (registration
  // failed, or the app used them in a way registration cannot follow).
  void forbid(uint64_t begin, uint64_t end);

  uint32_t size() const;
  bool empty() const { return published_count_.load(std::memory_order_relaxed) == 0; }  // lock-free hint
  void clear();
  // Held across fork() so that the child never inherits the lock taken.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

 private:
  struct Range {
    uint64_t begin, end;
    uint64_t copied;
    uint32_t copies;
    HostSource source;
    bool forbidden;
  };
  uint32_t first_ending_after(uint64_t p) const;  // first range with end > p
  void erase_at(uint32_t i);

  mutable RankedMutex mutex_{LockRank::kHostRanges};
  uint32_t count_ = 0;
  std::atomic<uint32_t> published_count_{0};
  Range ranges_[kCapacity];  // sorted by begin, disjoint
};

// The process-wide table (the libc hooks and the rewrite share it).
HostRanges& host_ranges();

// Smallest allocation the libc hooks record; 0 while they only forward
// (observe mode, CUXFER_REGISTER=off, or before the shim's constructor).
namespace detail {
extern std::atomic<uint64_t> g_track_min;
}
inline uint64_t host_tracking_min() { return detail::g_track_min.load(std::memory_order_relaxed); }
void enable_host_tracking(uint64_t min_bytes);

}  // namespace cuxfer::shim
