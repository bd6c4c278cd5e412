#include "rewrite/registration_cache.h"

#include <algorithm>
#include <new>

#include "core/clock.h"
#include "core/spin.h"

namespace cuxfer::shim::rewrite {

namespace {

constexpr auto kRelaxed = std::memory_order_relaxed;
constexpr auto kAcquire = std::memory_order_acquire;
constexpr auto kRelease = std::memory_order_release;
constexpr auto kAcqRel = std::memory_order_acq_rel;
constexpr uint64_t kGenMask = (1ull << 40) - 1;

// An unregister error after which the driver holds nothing: the range was not
// (or is no longer) registered, or its context or the driver is gone.
bool nothing_left_registered(int status) {
  constexpr int kDeinitialized = 4, kContextIsDestroyed = 709, kHostMemoryNotRegistered = 713;
  return status == 0 || status == kHostMemoryNotRegistered || status == kContextIsDestroyed ||
         status == kDeinitialized;
}

std::atomic<RegistrationCache*> g_process_cache{nullptr};

}  // namespace

void detail::drain_process_cache() {
  if (RegistrationCache* c = g_process_cache.load(kAcquire)) c->drain_pending();
}

RegistrationCache::RegistrationCache(RegistrationOps& ops, uint64_t budget, std::atomic<uint32_t>* count,
                                     uint64_t page)
    : ops_(ops),
      budget_(budget),
      page_(page),
      slots_(new (std::nothrow) Slot[kCapacity]),
      index_(new (std::nothrow) IndexEntry[kCapacity]),
      capacity_(slots_ && index_ ? kCapacity : 0),
      count_(count ? *count : own_count_),
      queued_(ops.process_wide() ? detail::g_unregistrations_queued : own_queued_) {
  if (ops.process_wide()) g_process_cache.store(this, kRelease);
}

RegistrationCache::~RegistrationCache() {
  RegistrationCache* self = this;
  g_process_cache.compare_exchange_strong(self, nullptr);
}

// --- the writers' lock and the index (a seqlock, as memory/allocation_table) ----------

void RegistrationCache::lock() const {
  lock_order::check(LockRank::kRegistrationWriters, "lock");
  unsigned spins = 0;
  for (;;) {
    if (!writer_.exchange(true, kAcquire)) return lock_order::held(LockRank::kRegistrationWriters);
    while (writer_.load(kRelaxed)) spin_relax(spins);
  }
}

void RegistrationCache::write_begin() {
  seq_.store(seq_.load(kRelaxed) + 1, kRelaxed);  // odd: a change in progress
  std::atomic_thread_fence(kRelease);
}

void RegistrationCache::write_end() { seq_.store(seq_.load(kRelaxed) + 1, kRelease); }

uint32_t RegistrationCache::index_lower(uint64_t key, uint32_t n) const {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (index_[mid].begin.load(kRelaxed) <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

void RegistrationCache::index_insert(uint64_t begin, uint64_t end, uint32_t slot, uint64_t gen) {
  const uint32_t n = index_count_.load(kRelaxed);
  const uint32_t pos = index_lower(begin, n);
  write_begin();
  for (uint32_t i = n; i > pos; --i) {
    index_[i].begin.store(index_[i - 1].begin.load(kRelaxed), kRelaxed);
    index_[i].end.store(index_[i - 1].end.load(kRelaxed), kRelaxed);
    index_[i].slot_gen.store(index_[i - 1].slot_gen.load(kRelaxed), kRelaxed);
  }
  index_[pos].begin.store(begin, kRelaxed);
  index_[pos].end.store(end, kRelaxed);
  index_[pos].slot_gen.store(uint64_t(slot) << 40 | (gen & kGenMask), kRelaxed);
  index_count_.store(n + 1, kRelaxed);
  write_end();
}

void RegistrationCache::index_erase(uint64_t begin) {
  const uint32_t n = index_count_.load(kRelaxed);
  uint32_t pos = index_lower(begin, n);
  if (pos == 0 || index_[pos - 1].begin.load(kRelaxed) != begin) return;
  --pos;
  write_begin();
  for (uint32_t i = pos; i + 1 < n; ++i) {
    index_[i].begin.store(index_[i + 1].begin.load(kRelaxed), kRelaxed);
    index_[i].end.store(index_[i + 1].end.load(kRelaxed), kRelaxed);
    index_[i].slot_gen.store(index_[i + 1].slot_gen.load(kRelaxed), kRelaxed);
  }
  index_count_.store(n - 1, kRelaxed);
  write_end();
}

RegistrationCache::Found RegistrationCache::find(uint64_t p, uint64_t end) const {
  unsigned spins = 0;
  for (;;) {
    const uint64_t s1 = seq_.load(kAcquire);
    if (s1 & 1) {  // a writer is moving entries (a few stores, never a driver call)
      spin_relax(spins);
      continue;
    }
    const uint32_t n = index_count_.load(kRelaxed);
    if (n > capacity_) continue;
    const uint32_t pos = index_lower(p, n);
    Found f;
    if (pos > 0) {
      const IndexEntry& c = index_[pos - 1];
      const uint64_t cb = c.begin.load(kRelaxed), ce = c.end.load(kRelaxed), sg = c.slot_gen.load(kRelaxed);
      if (ce > p) {
        f.any = true;
        if (cb <= p && ce >= end) {
          f.candidate = true;
          f.slot = static_cast<uint32_t>(sg >> 40);
          f.gen = sg & kGenMask;
        }
      }
    }
    if (!f.any && pos < n && index_[pos].begin.load(kRelaxed) < end) f.any = true;
    std::atomic_thread_fence(kAcquire);
    if (seq_.load(kRelaxed) != s1) continue;
    if (f.candidate && f.slot >= capacity_) continue;
    return f;
  }
}

// --- lookups: no lock -------------------------------------------------------------

Cover RegistrationCache::peek(uint64_t p, uint64_t n) const {
  if (empty()) return Cover::None;
  const Found f = find(p, p + std::max<uint64_t>(n, 1));
  if (!f.any) return Cover::None;
  if (f.candidate) {
    const uint64_t w = slots_[f.slot].word.load(kAcquire);
    if (state_of(w) == Live && (gen_of(w) & kGenMask) == f.gen) return Cover::Covers;
  }
  return Cover::Touches;
}

Cover RegistrationCache::lookup(uint64_t p, uint64_t n) {
  drain_pending();
  if (empty()) return Cover::None;
  const Found f = find(p, p + std::max<uint64_t>(n, 1));
  if (!f.any) return Cover::None;
  if (f.candidate) {
    Slot& s = slots_[f.slot];
    // Live now and the same incarnation the index named: the registration
    // holds the whole range (its bounds never change while it lives).
    const uint64_t w = s.word.load(kAcquire);
    if (state_of(w) == Live && (gen_of(w) & kGenMask) == f.gen) {
      const uint64_t t = clock_.load(kRelaxed) + 1;  // loosely: a lost tick only blurs LRU order
      clock_.store(t, kRelaxed);
      s.last_use.store(t, kRelaxed);
      return Cover::Covers;
    }
  }
  return Cover::Touches;
}

// --- slots --------------------------------------------------------------------------

uint32_t RegistrationCache::alloc_slot(uint64_t begin, uint64_t end, State initial) {
  const uint32_t hw = high_water_.load(kRelaxed);
  uint32_t i = 0;
  while (i < hw && state_of(slots_[i].word.load(kRelaxed)) != Free) ++i;
  if (i == capacity_) return capacity_;
  Slot& s = slots_[i];
  // A new generation while still Free, then the bounds, then the publication:
  // a reader that sees this generation in any other state sees these bounds.
  const uint64_t next = (gen_of(s.word.load(kRelaxed)) + 1) << kStateBits;
  s.word.store(next | Free, kRelaxed);
  std::atomic_thread_fence(kRelease);
  s.begin.store(begin, kRelaxed);
  s.end.store(end, kRelaxed);
  s.queued_at.store(~0ull, kRelaxed);
  s.unregister_failures.store(0, kRelaxed);
  s.retry_at_ns.store(0, kRelaxed);
  s.last_use.store(clock_.fetch_add(1, kRelaxed) + 1, kRelaxed);
  if (i == hw) high_water_.store(hw + 1, kRelease);
  s.word.store(next | initial, kRelease);
  ++entries_;
  count_.store(entries_, kRelease);
  return i;
}

void RegistrationCache::free_slot_locked(uint32_t i) {
  Slot& s = slots_[i];
  s.word.store(with_state(s.word.load(kRelaxed), Free), kRelease);
  --entries_;
  count_.store(entries_, kRelease);
}

void RegistrationCache::lower_to(std::atomic<uint64_t>& a, uint64_t v) {
  uint64_t cur = a.load(kRelaxed);
  while (v < cur && !a.compare_exchange_weak(cur, v, kRelaxed)) {
  }
}

bool RegistrationCache::mark(uint32_t i, uint64_t w, uint64_t ticket) {
  Slot& s = slots_[i];
  const State st = state_of(w);
  const State to = st == Live ? Invalid : st == Reserved ? Withdrawn : Doomed;
  lower_to(s.queued_at, ticket);
  // Counted before it is visible as queued: whoever drains it subtracts after.
  queued_.fetch_add(1, std::memory_order_seq_cst);
  if (s.word.compare_exchange_strong(w, with_state(w, to), kAcqRel)) return true;
  queued_.fetch_sub(1, kRelease);
  return false;
}

void RegistrationCache::settle_notify() {
  settled_.fetch_add(1, kRelease);
  settled_.notify_all();
}

bool RegistrationCache::keep_for_retry(uint32_t i, uint64_t b, uint64_t e, int status) {
  Slot& s = slots_[i];
  const uint32_t failures = s.unregister_failures.fetch_add(1, kRelaxed) + 1;
  const bool give_up = failures >= kUnregisterTries;
  ops_.on_unregister_failed(b, e, status, give_up);
  if (give_up) return false;
  s.retry_at_ns.store(now_ns() + (kUnregisterRetryNs << (failures - 1)), kRelaxed);
  // Still queued (queued_ unchanged) and never Covers: no copy trusts it and
  // no registration is made over it while the driver may hold those pages.
  s.word.store(with_state(s.word.load(kRelaxed), Invalid), kRelease);
  settle_notify();
  return true;
}

void RegistrationCache::forget_queued(uint32_t i) {
  Slot& s = slots_[i];
  const uint64_t b = s.begin.load(kRelaxed), e = s.end.load(kRelaxed);
  lock();
  index_erase(b);
  bytes_.fetch_sub(e - b, kRelaxed);
  free_slot_locked(i);
  unlock();
  queued_.fetch_sub(1, kAcqRel);
  settle_notify();
}

bool RegistrationCache::unregister_and_free(uint32_t i) {
  Slot& s = slots_[i];
  const uint64_t b = s.begin.load(kRelaxed), e = s.end.load(kRelaxed);
  const int status = ops_.unregister_range(b);
  if (!nothing_left_registered(status) && keep_for_retry(i, b, e, status)) return false;
  ops_.on_unregistered(b, e);
  forget_queued(i);
  return true;
}

// --- invalidation: no lock, no driver, no wait ---------------------------------------

uint32_t RegistrationCache::invalidate_nowait(uint64_t begin, uint64_t end) {
  if (end <= begin || empty()) return 0;
  const uint64_t ticket = tickets_.fetch_add(1, kAcqRel) + 1;
  uint32_t marked = 0;
  const uint32_t hw = high_water_.load(kAcquire);
  for (uint32_t i = 0; i < hw; ++i) {
    Slot& s = slots_[i];
    for (;;) {
      uint64_t w = s.word.load(kAcquire);
      const State st = state_of(w);
      if (st != Live && st != Pending && st != Reserved) break;  // free, or already on its way out
      const uint64_t b = s.begin.load(kRelaxed), e = s.end.load(kRelaxed);
      std::atomic_thread_fence(kAcquire);
      if (s.word.load(kRelaxed) != w) continue;  // changed while we read its bounds
      if (b >= end || e <= begin) break;
      if (mark(i, w, ticket)) {
        ++marked;
        break;
      }
    }
  }
  return marked;
}

// --- draining -----------------------------------------------------------------------

void RegistrationCache::drain_slow() {
  // Everything invalidated before this call has a ticket <= mine.
  const uint64_t mine = tickets_.load(kAcquire);
  for (;;) {
    const uint32_t seen = settled_.load(kAcquire);
    bool wait = false;
    const uint32_t hw = high_water_.load(kAcquire);
    uint64_t now = 0;  // read once, and only if a failed unregister waits for its retry
    for (uint32_t i = 0; i < hw; ++i) {
      Slot& s = slots_[i];
      for (;;) {
        uint64_t w = s.word.load(kAcquire);
        const State st = state_of(w);
        if (st == Invalid) {
          if (const uint64_t at = s.retry_at_ns.load(kRelaxed); at != 0 && at > (now ? now : now = now_ns()))
            break;  // a failed unregister, not due again yet
          if (!s.word.compare_exchange_strong(w, with_state(w, Unregistering), kAcqRel)) continue;
          unregister_and_free(i);
        } else if (st == Withdrawn) {
          if (!s.word.compare_exchange_strong(w, with_state(w, Unregistering), kAcqRel)) continue;
          forget_queued(i);
        } else if ((st == Doomed || st == Unregistering) && s.queued_at.load(kRelaxed) <= mine) {
          wait = true;  // another thread's register or unregister is still in the driver
        }
        break;
      }
    }
    if (!wait) return;
    settled_.wait(seen, kAcquire);
  }
}

// --- registering --------------------------------------------------------------------

RegistrationCache::Reservation RegistrationCache::reserve(uint64_t begin, uint64_t end) {
  Reservation res;
  AddResult& r = res.result;
  r.status = -1;
  drain_pending();
  uint64_t b = begin & ~(page_ - 1);
  uint64_t e = (end + page_ - 1) & ~(page_ - 1);
  if (e <= b || e - b > budget_ || capacity_ == 0) return res;

  lock();
  // Merge: the union of every registration the new range overlaps (entries
  // are disjoint and sorted, so one pass that widens [b, e) finds them all).
  const uint32_t n = index_count_.load(kRelaxed);
  uint32_t first = index_lower(b, n);
  if (first > 0 && index_[first - 1].end.load(kRelaxed) > b) --first;
  uint32_t last = first;
  uint64_t merged_bytes = 0;
  for (; last < n && index_[last].begin.load(kRelaxed) < e; ++last) {
    const uint64_t mb = index_[last].begin.load(kRelaxed), me = index_[last].end.load(kRelaxed);
    const uint32_t slot = static_cast<uint32_t>(index_[last].slot_gen.load(kRelaxed) >> 40);
    if (state_of(slots_[slot].word.load(kAcquire)) != Live) {  // another thread is changing it: not now
      unlock();
      return res;
    }
    b = std::min(b, mb);
    e = std::max(e, me);
    merged_bytes += me - mb;
  }
  const uint64_t need = e - b;
  const uint64_t held = bytes_.load(kRelaxed);
  uint64_t projected = held - merged_bytes;
  const uint32_t hw = high_water_.load(kRelaxed);
  auto evictable = [&](uint32_t i, uint64_t w) {
    if (state_of(w) != Live) return false;
    const uint64_t sb = slots_[i].begin.load(kRelaxed), se = slots_[i].end.load(kRelaxed);
    return se <= b || sb >= e;  // the merged entries are not evicted, they are replaced
  };
  if (need > budget_) {
    unlock();
    return res;
  }
  if (projected + need > budget_) {
    uint64_t room = 0;
    for (uint32_t i = 0; i < hw; ++i)
      if (evictable(i, slots_[i].word.load(kAcquire))) room += slots_[i].end.load(kRelaxed) - slots_[i].begin.load(kRelaxed);
    if (projected - std::min(projected, room) + need > budget_) {  // the rest is pending or on its way out
      unlock();
      return res;
    }
  }
  // Claim the merged and evicted entries: queued like invalidated ones, then
  // drained below, before the new registration is made.
  const uint64_t ticket = tickets_.fetch_add(1, kAcqRel) + 1;
  for (uint32_t j = first; j < last; ++j) {
    const uint32_t slot = static_cast<uint32_t>(index_[j].slot_gen.load(kRelaxed) >> 40);
    const uint64_t w = slots_[slot].word.load(kAcquire);
    if (state_of(w) == Live) mark(slot, w, ticket);  // else an invalidation queued it already
    ++r.unregistered;
  }
  while (projected + need > budget_) {
    uint32_t lru = capacity_;
    uint64_t lru_w = 0, oldest = ~0ull;
    for (uint32_t i = 0; i < hw; ++i) {
      const uint64_t w = slots_[i].word.load(kAcquire);
      if (!evictable(i, w)) continue;
      const uint64_t used = slots_[i].last_use.load(kRelaxed);
      if (lru == capacity_ || used < oldest) lru = i, lru_w = w, oldest = used;
    }
    if (lru == capacity_) break;  // invalidated meanwhile: drained below, and checked again
    const uint64_t size = slots_[lru].end.load(kRelaxed) - slots_[lru].begin.load(kRelaxed);
    if (!mark(lru, lru_w, ticket)) continue;
    projected -= std::min(projected, size);
    r.evicted_bytes += size;
    ++r.unregistered;
  }
  unlock();
  drain_pending();  // unregisters what was claimed (and anything else queued)

  lock();
  // The range may have been taken meanwhile by another thread's registration.
  const uint32_t n2 = index_count_.load(kRelaxed);
  const uint32_t pos = index_lower(b, n2);
  const bool taken = (pos > 0 && index_[pos - 1].end.load(kRelaxed) > b) ||
                     (pos < n2 && index_[pos].begin.load(kRelaxed) < e);
  if (taken || bytes_.load(kRelaxed) + need > budget_) {
    unlock();
    return res;
  }
  const uint32_t i = alloc_slot(b, e, Reserved);
  if (i == capacity_) {
    unlock();
    return res;
  }
  Slot& s = slots_[i];
  const uint64_t w = s.word.load(kRelaxed);  // Reserved; only complete() or an invalidation changes it
  index_insert(b, e, i, gen_of(w));
  bytes_.fetch_add(need, kRelaxed);
  unlock();
  res.ok = true;
  res.slot = i;
  res.word = w;
  r.begin = b;
  r.end = e;
  return res;
}

AddResult RegistrationCache::complete(const Reservation& res) {
  AddResult r = res.result;
  const uint32_t i = res.slot;
  const uint64_t w = res.word;
  const uint64_t b = r.begin, e = r.end, need = e - b;
  Slot& s = slots_[i];
  // Into the driver only while still Reserved. Withdrawn meanwhile (its
  // memory went away, or a copy needed it unregistered): no driver call; the
  // slot is freed here unless a drain got to it first.
  uint64_t reserved = with_state(w, Reserved);
  if (!s.word.compare_exchange_strong(reserved, with_state(w, Pending), kAcqRel)) {
    if (reserved == with_state(w, Withdrawn) &&
        s.word.compare_exchange_strong(reserved, with_state(w, Unregistering), kAcqRel))
      forget_queued(i);
    r.status = -1;
    r.withdrawn = true;
    return r;
  }
  const int status = ops_.register_range(b, need);
  if (status == 0) ops_.on_registered(b, e);
  uint64_t cur = with_state(w, Pending);
  if (status == 0) {
    if (s.word.compare_exchange_strong(cur, with_state(w, Live), kAcqRel)) {
      r.status = 0;
      return r;
    }
    // Doomed: its memory went away while the driver pinned it. Nobody else
    // touches a doomed entry: unregister it now (free() did not wait for it).
    s.word.store(with_state(w, Unregistering), kRelease);
    unregister_and_free(i);
    r.doomed = true;
    return r;
  }
  // Failed: nothing to unregister. Out of Pending/Doomed first, so that no
  // invalidation marks it while it is being removed.
  while (!s.word.compare_exchange_weak(cur, with_state(w, Unregistering), kAcqRel)) {
  }
  const bool was_doomed = state_of(cur) == Doomed;
  lock();
  index_erase(b);
  bytes_.fetch_sub(need, kRelaxed);
  free_slot_locked(i);
  unlock();
  if (was_doomed) {
    queued_.fetch_sub(1, kAcqRel);
    settle_notify();
  }
  r.status = status;
  return r;
}

AddResult RegistrationCache::add(uint64_t begin, uint64_t end) {
  const Reservation res = reserve(begin, end);
  return res.ok ? complete(res) : res.result;
}


// --- synchronous drops, fork ----------------------------------------------------------

uint32_t RegistrationCache::invalidate(uint64_t begin, uint64_t end) {
  if (end <= begin) return 0;
  const uint32_t n = invalidate_nowait(begin, end);
  drain_pending();
  return n;
}

uint32_t RegistrationCache::clear() { return invalidate(0, ~0ull); }

void RegistrationCache::forget_all_after_fork() {
  // The only thread of the child: whatever the parent's other threads held
  // (the writers' word, an odd sequence, entries half way through a state)
  // is reset with plain stores. No lock object is constructed over a held one.
  writer_.store(false, kRelaxed);
  const uint64_t s = seq_.load(kRelaxed);
  seq_.store((s | 1) + 1, kRelaxed);
  index_count_.store(0, kRelaxed);
  const uint32_t hw = high_water_.load(kRelaxed);
  for (uint32_t i = 0; i < hw; ++i) {
    slots_[i].word.store(with_state(slots_[i].word.load(kRelaxed), Free), kRelaxed);
    slots_[i].queued_at.store(~0ull, kRelaxed);
  }
  bytes_.store(0, kRelaxed);
  entries_ = 0;
  queued_.store(0, kRelaxed);
  settled_.fetch_add(1, kRelaxed);
  count_.store(0, kRelease);
}

}  // namespace cuxfer::shim::rewrite
