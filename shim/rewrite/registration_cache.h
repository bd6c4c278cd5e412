// The registration cache of the pinned rewrite: host ranges the shim has
// registered in place (cuMemHostRegister), as an interval map with a byte
// budget and least-recently-used eviction, after UCX's rcache.
//
// Invariants:
//   - Registrations are page-aligned and disjoint. A new range that overlaps
//     existing ones replaces them with their union.
//   - A registration is dropped (unregistered) before the memory under it can
//     go away: the libc hooks call invalidate() before free, munmap, ...
//   - While an entry is being registered or unregistered it is still in the
//     map: lookups then say "touches" (never "covers"), so a concurrent copy
//     on that memory keeps the app's pageable semantics instead of trusting a
//     registration that may or may not be there.
//   - The budget counts every entry, pending ones included, and is never exceeded.
//   - Driver calls are made without the cache's lock held, so a free() inside
//     the driver never waits on a thread that is itself inside the driver.
//
// The driver is behind RegistrationOps so that unit tests can run the cache
// without CUDA.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace cuxfer::shim::rewrite {

class RegistrationOps {
 public:
  virtual ~RegistrationOps() = default;
  // CUresult of cuMemHostRegister / cuMemHostUnregister.
  virtual int register_range(uint64_t begin, uint64_t bytes) = 0;
  virtual int unregister_range(uint64_t begin) = 0;
  // The registration now exists or no longer does (allocation table upkeep).
  virtual void on_registered(uint64_t, uint64_t) {}
  virtual void on_unregistered(uint64_t, uint64_t) {}
};

enum class Cover : uint8_t {
  None,     // no registration overlaps the range
  Touches,  // one does, but not one live registration over all of it
  Covers,   // one live registration holds the whole range
};

struct AddResult {
  int status = 0;              // 0 registered; else the driver's error, or -1 (no room / busy)
  uint64_t begin = 0, end = 0; // the registration made (page-aligned, maybe a union)
  uint64_t evicted_bytes = 0;  // registrations dropped to make room
  uint32_t unregistered = 0;   // entries unregistered on the way (evicted or merged)
};

class RegistrationCache {
 public:
  // `count` (optional) mirrors the number of entries, for lock-free "any?" checks.
  RegistrationCache(RegistrationOps& ops, uint64_t budget, std::atomic<uint32_t>* count = nullptr,
                    uint64_t page = 4096)
      : ops_(ops), budget_(budget), page_(page), count_(count ? *count : own_count_) {}

  Cover lookup(uint64_t p, uint64_t n);  // marks a covering entry as just used
  // Registers [begin, end) rounded out to pages. Merges with overlapping
  // entries; evicts the least recently used others to stay in budget.
  AddResult add(uint64_t begin, uint64_t end);
  // Drops every registration overlapping [begin, end). Returns when they are
  // unregistered (waiting for any being registered by another thread).
  uint32_t invalidate(uint64_t begin, uint64_t end);
  // Unregisters everything (shutdown); returns how many.
  uint32_t clear();
  // Fork child: the parent's registrations are not ours; forget without the driver.
  void forget_all_after_fork();

  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  uint64_t bytes() const;
  uint32_t count() const { return count_.load(std::memory_order_relaxed); }
  uint64_t budget() const { return budget_; }

 private:
  enum class State : uint8_t { Pending, Live, Dying };
  struct Entry {
    uint64_t end;
    uint64_t last_use;
    State state;
  };
  using Map = std::map<uint64_t, Entry>;
  Map::iterator first_overlap(uint64_t begin, uint64_t end);
  // Marks `victims` dying (lock held); unregisters them and erases them (lock released).
  void drop(std::unique_lock<std::mutex>& lock, std::vector<uint64_t>& victims);

  RegistrationOps& ops_;
  const uint64_t budget_;
  const uint64_t page_;
  mutable std::mutex mutex_;
  std::condition_variable settled_;  // an entry left Pending or Dying
  Map map_;
  uint64_t bytes_ = 0;  // all entries, pending and dying included
  uint64_t clock_ = 0;
  std::atomic<uint32_t> own_count_{0};
  std::atomic<uint32_t>& count_;
};

}  // namespace cuxfer::shim::rewrite
