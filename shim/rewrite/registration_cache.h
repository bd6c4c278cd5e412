// The registration cache of the pinned rewrite: host ranges the shim has
// registered in place (cuMemHostRegister), as an interval map with a byte
// budget and least-recently-used eviction, after UCX's rcache
// (src/ucs/memory/rcache.c: invalidations from memory events are queued and
// the deregistrations run later, where the library is in control).
//
// Invariants:
//   - Registrations are page-aligned and disjoint. A new range that overlaps
//     existing ones replaces them with their union.
//   - Only a Live entry ever answers Covers. An entry reserved (Reserved,
//     Withdrawn), being registered (Pending), invalidated (Invalid, Doomed)
//     or unregistered (Unregistering) is still in the map and answers
//     Touches, so that no copy trusts a registration that may or may not be
//     there.
//   - A Reserved entry has had no driver call: an invalidation withdraws it
//     (Withdrawn) and the next drain frees it without the driver and without
//     waiting for anyone, so a reservation may be held across a copy without
//     making any other thread wait for that copy.
//   - The libc hooks never call the driver and never wait (DESIGN principle
//     10): invalidate_nowait() marks the entries over memory that is going
//     away Invalid (lock-free) and queues them. The actual cuMemHostUnregister
//     calls happen in drain_pending(), which lookup(), add(), invalidate() and
//     clear() run first, and which every hook must run before its call reaches
//     the driver (drain_pending_registrations(), below): a registration left
//     over unmapped or remapped memory makes the driver copy the OLD pages.
//   - An entry invalidated while another thread is inside its
//     cuMemHostRegister becomes Doomed: that thread unregisters it itself when
//     the call returns. drain_pending() waits for such entries (and for those
//     another thread is unregistering) that were queued before it was called,
//     so when it returns nothing queued before it is still in the driver.
//   - An unregister that fails while the driver may still hold the pages
//     (any error but "not registered" or a context already gone) keeps the
//     entry, queued and Invalid, and a later drain tries again, the first
//     retry after kUnregisterRetryNs and each further one after twice as
//     long; after kUnregisterTries failures it is forgotten and reported
//     (RegistrationOps::on_unregister_failed). A drain does not wait for an
//     entry whose retry is not due.
//   - The budget counts every entry until it is unregistered, and is never exceeded.
//   - Driver calls are made without the cache's lock held; lookups take no
//     lock at all (a seqlock over a sorted index, as memory/allocation_table
//     does), invalidations none either.
//   - A fork child resets the cache with plain stores: there is no mutex to
//     inherit held (the writers' lock is one atomic word).
//
// The driver is behind RegistrationOps so that unit tests can run the cache
// without CUDA.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/hot_line.h"
#include "core/ranked_lock.h"
#include "rewrite/capture_watch.h"

namespace cuxfer::shim::rewrite {

class RegistrationOps {
 public:
  virtual ~RegistrationOps() = default;
  // CUresult of cuMemHostRegister / cuMemHostUnregister.
  virtual int register_range(uint64_t begin, uint64_t bytes) = 0;
  virtual int unregister_range(uint64_t begin) = 0;
  // The registration now exists (called after a successful register, before
  // the entry can answer Covers) or no longer does (called after the
  // unregister): allocation table upkeep.
  virtual void on_registered(uint64_t, uint64_t) {}
  virtual void on_unregistered(uint64_t, uint64_t) {}
  // An unregister of [begin, end) failed with `status` while the driver may
  // still hold the pages: the entry stays (answering Touches, blocking any
  // registration over it) and is tried again by a later drain, or, once
  // `given_up`, is forgotten after kUnregisterTries failures (say so).
  virtual void on_unregister_failed(uint64_t /*begin*/, uint64_t /*end*/, int /*status*/, bool /*given_up*/) {}
  // True for the shim's own cache (DriverOps): its queue of unregistrations
  // is then what drain_pending_registrations() below checks and drains.
  virtual bool process_wide() const { return false; }
};

enum class Cover : uint8_t {
  None,     // no registration overlaps the range
  Touches,  // one does, but not one live registration over all of it
  Covers,   // one live registration holds the whole range
};

struct AddResult {
  int status = 0;              // 0 registered; else the driver's error, or -1 (no room / busy / doomed)
  uint64_t begin = 0, end = 0; // the registration made (page-aligned, maybe a union)
  uint64_t evicted_bytes = 0;  // registrations dropped to make room
  uint32_t unregistered = 0;   // entries unregistered on the way (evicted or merged)
  bool doomed = false;         // registered, but its memory went away meanwhile: unregistered again (status -1)
  bool withdrawn = false;      // reserved, then invalidated before its registration began: no driver call (status -1)
};

class RegistrationCache;

namespace detail {
// The shim's cache and the length of its queue (entries invalidated but not
// yet unregistered, plus doomed ones), for the one-load check below.
// On the hot line (core/hot_line.h): every hook reads it.
inline constexpr std::atomic<uint32_t>& g_unregistrations_queued = g_hot_line.unregistrations_queued;
void drain_process_cache();
}  // namespace detail

// To be called by every hook before its call reaches the driver (a copy, a
// host-memory or pointer query, an allocation): unregisters what the libc
// hooks queued, so that no driver call sees a registration over memory that
// was freed or unmapped. One acquire load (a plain load on x86) when nothing
// is queued.
// Not while a graph capture in global mode is open (capture_watch.h): the
// capturing thread itself may be the one here, and cuMemHostUnregister is no
// call to make in the middle of its capture; the queue waits for the capture's
// end (the queued entries already answer no lookup).
inline void drain_pending_registrations() {
  if (__builtin_expect(detail::g_unregistrations_queued.load(std::memory_order_acquire) != 0, 0) &&
      !global_capture_open())
    detail::drain_process_cache();
}

class RegistrationCache {
 public:
  // Most entries the cache holds (registrations are >= CUXFER_REGISTER_MIN,
  // and the budget is at most 4 GiB); add() answers -1 when they are taken.
  static constexpr uint32_t kCapacity = 4096;
  // A failed unregister is tried this many times in all, the retries spaced
  // kUnregisterRetryNs, then twice that, and so on (about 150 ms in all: a
  // graph capture or a driver busy elsewhere may pass meanwhile).
  static constexpr uint32_t kUnregisterTries = 5;
  static constexpr uint64_t kUnregisterRetryNs = 10'000'000;

  // `count` (optional) mirrors the number of entries, for lock-free "any?" checks.
  RegistrationCache(RegistrationOps& ops, uint64_t budget, std::atomic<uint32_t>* count = nullptr,
                    uint64_t page = 4096);
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // Drains first. Lock-free. Marks a covering entry as just used.
  Cover lookup(uint64_t p, uint64_t n);
  // Registers [begin, end) rounded out to pages (drains first). Merges with
  // overlapping entries; evicts the least recently used others to stay in budget.
  AddResult add(uint64_t begin, uint64_t end);
  // add() in two steps, for a registration made on another thread than the
  // copy that asked for it (rewrite/background_registrar.h), and later than
  // that copy: reserve() does everything but the driver's cuMemHostRegister
  // -- the merges, the evictions and their unregistrations -- and leaves the
  // range Reserved (it answers Touches; an invalidation meanwhile withdraws
  // it, waiting for nobody); complete() makes it Pending, makes the driver
  // call (a free() now makes it Doomed) and settles it as add() does, or,
  // withdrawn, makes no call (`withdrawn`). A reservation that succeeded
  // (`ok`) must be completed, by exactly one thread.
  struct Reservation {
    bool ok = false;
    uint32_t slot = 0;
    uint64_t word = 0;
    AddResult result;  // when !ok: add()'s answer (status -1); else begin, end and what was evicted
  };
  Reservation reserve(uint64_t begin, uint64_t end);
  AddResult complete(const Reservation& r);
  // Drops every registration overlapping [begin, end). Returns when they are
  // unregistered (waiting for any being registered by another thread). For
  // callers in control of the thread (copy hooks); the libc hooks use
  // invalidate_nowait().
  uint32_t invalidate(uint64_t begin, uint64_t end);
  // Unregisters everything (shutdown, context teardown); returns how many.
  uint32_t clear();
  // Fork child: the parent's registrations are not ours; forget without the driver.
  void forget_all_after_fork();

  // From the libc hooks (free, munmap, madvise, ...): marks every entry
  // overlapping [begin, end) invalid at once and queues it for drain_pending();
  // never calls the driver, never waits, never allocates. Returns how many
  // entries it marked.
  uint32_t invalidate_nowait(uint64_t begin, uint64_t end);
  // Unregisters every queued entry, and waits for those queued before this
  // call that another thread is unregistering or still registering. One
  // acquire load when nothing is queued.
  void drain_pending() {
    if (__builtin_expect(queued_.load(std::memory_order_acquire) != 0, 0)) drain_slow();
  }
  // Entries invalidated but not yet unregistered (a hint).
  uint32_t pending() const { return queued_.load(std::memory_order_relaxed); }
  // What lookup() would answer, without draining or touching last use (tests, invariants).
  Cover peek(uint64_t p, uint64_t n) const;

  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  uint32_t count() const { return count_.load(std::memory_order_relaxed); }
  uint64_t budget() const { return budget_; }

 private:
  enum State : uint64_t {
    Free = 0,
    Pending = 1,        // the adding thread is inside cuMemHostRegister
    Live = 2,           // registered; the only state that answers Covers
    Invalid = 3,        // queued: to be unregistered by whoever drains first
    Doomed = 4,         // invalidated while Pending: the adding thread unregisters it
    Unregistering = 5,  // a drainer (or the adding thread) is inside cuMemHostUnregister
    Reserved = 6,       // reserve() made it; no thread is in the driver for it yet
    Withdrawn = 7,      // invalidated while Reserved: whoever drains first frees it, without the driver
  };
  static constexpr unsigned kStateBits = 3;
  static State state_of(uint64_t w) { return static_cast<State>(w & ((1u << kStateBits) - 1)); }
  static uint64_t with_state(uint64_t w, State s) { return (w & ~uint64_t((1u << kStateBits) - 1)) | s; }
  static uint64_t gen_of(uint64_t w) { return w >> kStateBits; }

  // One registration. The state word (generation << 3 | state) changes by
  // CAS; begin/end are written only while the slot is Free, before the
  // release store that publishes it, so a reader that sees the same word
  // before and after reading them has read this incarnation's bounds.
  struct Slot {
    std::atomic<uint64_t> word{0};
    std::atomic<uint64_t> begin{0}, end{0};
    std::atomic<uint64_t> last_use{0};
    std::atomic<uint64_t> queued_at{~0ull};  // lowest invalidation ticket that queued it
    std::atomic<uint32_t> unregister_failures{0};
    std::atomic<uint64_t> retry_at_ns{0};  // a failed unregister is not tried again before this
  };
  // The sorted index lookups search: [begin, end) and the slot, by begin.
  struct IndexEntry {
    std::atomic<uint64_t> begin{0}, end{0};
    std::atomic<uint64_t> slot_gen{0};  // slot << 40 | generation (low 40 bits)
  };
  struct Found {
    bool any = false;        // an entry overlaps the range
    bool candidate = false;  // the entry starting at or before p holds the whole range
    uint32_t slot = 0;
    uint64_t gen = 0;
  };

  // The writers' lock: one atomic word, so that a fork child can reset it.
  // Ranked (core/ranked_lock.h) like the shim's mutexes: a leaf.
  void lock() const;
  void unlock() const {
    lock_order::released(LockRank::kRegistrationWriters);
    writer_.store(false, std::memory_order_release);
  }

  Found find(uint64_t p, uint64_t end) const;  // seqlock read of the index
  uint32_t index_lower(uint64_t key, uint32_t n) const;  // first index entry with begin > key (writer)
  void index_insert(uint64_t begin, uint64_t end, uint32_t slot, uint64_t gen);
  void index_erase(uint64_t begin);
  void write_begin();
  void write_end();

  // Writer lock held.
  uint32_t alloc_slot(uint64_t begin, uint64_t end, State initial);  // kCapacity when full
  void free_slot_locked(uint32_t i);
  // Marks slot i (word w, overlap already checked) invalid for `ticket`.
  // False if the word changed under it.
  bool mark(uint32_t i, uint64_t w, uint64_t ticket);
  static void lower_to(std::atomic<uint64_t>& a, uint64_t v);
  // Unregisters slot i, which this thread owns in state Unregistering, and
  // frees it; or, when the driver refused and may still hold the pages, puts
  // it back Invalid for a later retry (false).
  bool unregister_and_free(uint32_t i);
  // Removes queued slot i, owned by this thread in state Unregistering, once
  // nothing of it is in the driver (unregistered, or withdrawn before any
  // driver call): its index entry, its bytes, the slot, its place in the queue.
  void forget_queued(uint32_t i);
  // After a failed unregister of slot i: true when it is to be tried again.
  bool keep_for_retry(uint32_t i, uint64_t b, uint64_t e, int status);
  void settle_notify();
  void drain_slow();

  RegistrationOps& ops_;
  const uint64_t budget_;
  const uint64_t page_;
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<IndexEntry[]> index_;
  const uint32_t capacity_;
  mutable std::atomic<bool> writer_{false};
  std::atomic<uint64_t> seq_{0};          // index seqlock: odd while a writer changes it
  std::atomic<uint32_t> index_count_{0};
  std::atomic<uint32_t> high_water_{0};   // slots [0, high_water_) may be in use
  std::atomic<uint64_t> bytes_{0};        // every entry until unregistered
  std::atomic<uint64_t> clock_{0};        // LRU clock (bumped loosely by lookups)
  std::atomic<uint64_t> tickets_{0};      // invalidation tickets
  std::atomic<uint32_t> settled_{0};      // bumped (and waited on) when a queued entry is resolved
  uint32_t entries_ = 0;                  // writer lock
  std::atomic<uint32_t> own_count_{0};
  std::atomic<uint32_t>& count_;
  std::atomic<uint32_t> own_queued_{0};
  std::atomic<uint32_t>& queued_;
};

}  // namespace cuxfer::shim::rewrite
