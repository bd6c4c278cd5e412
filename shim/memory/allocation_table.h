// What the shim saw allocated: address ranges with their memory kind and
// device. Read on every intercepted copy, written only by allocation calls.
// Readers never lock: a sequence counter (seqlock) over a fixed-capacity
// sorted array lets them retry the rare read that overlapped a write. Writers
// serialise on a mutex (allocation calls are not a hot path).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>

#include "core/ranked_lock.h"
#include "trace/event.h"

namespace cuxfer::shim {

struct Allocation {
  uint64_t begin = 0;
  uint64_t end = 0;  // one past the last byte
  trace::MemKind kind = trace::MemKind::Unknown;
  int8_t device = -1;
};

class AllocationTable {
 public:
  static constexpr uint32_t kCapacity = 1u << 16;

  // Returns false when the table is full (lookups then fall back to the driver).
  bool insert(uint64_t begin, uint64_t bytes, trace::MemKind kind, int8_t device);
  // Removes the range starting exactly at `begin`; returns it if present.
  std::optional<Allocation> erase(uint64_t begin);
  // The range containing `ptr`, if any. Lock-free.
  std::optional<Allocation> find(uint64_t ptr) const;
  // Bumped by every change; lets per-thread caches of driver answers expire.
  uint64_t generation() const { return seq_.load(std::memory_order_acquire); }
  uint32_t size() const { return count_.load(std::memory_order_relaxed); }
  void clear();
  // Held across fork() so the child never inherits the lock mid-update.
  void lock_for_fork() { write_mutex_.lock(); }
  void unlock_after_fork() { write_mutex_.unlock(); }

 private:
  struct Slot {
    std::atomic<uint64_t> begin{0};
    std::atomic<uint64_t> end{0};
    std::atomic<uint32_t> meta{0};  // kind | device << 8
  };
  void write_begin();
  void write_end();
  void copy_slot(uint32_t to, uint32_t from);
  uint32_t lower_bound(uint64_t key, uint32_t n) const;  // first slot with begin > key

  RankedMutex write_mutex_{LockRank::kAllocationTable};
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint32_t> count_{0};
  Slot slots_[kCapacity];
};

}  // namespace cuxfer::shim
