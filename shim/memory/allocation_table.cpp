#include "memory/allocation_table.h"
#include "core/export.h"

#include "core/spin.h"

namespace cuxfer::shim {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
}

void AllocationTable::write_begin() {
  seq_.store(seq_.load(kRelaxed) + 1, kRelaxed);  // odd: write in progress
  std::atomic_thread_fence(std::memory_order_release);
}

void AllocationTable::write_end() {
  seq_.store(seq_.load(kRelaxed) + 1, std::memory_order_release);  // even again
}

void AllocationTable::copy_slot(uint32_t to, uint32_t from) {
  slots_[to].begin.store(slots_[from].begin.load(kRelaxed), kRelaxed);
  slots_[to].end.store(slots_[from].end.load(kRelaxed), kRelaxed);
  slots_[to].meta.store(slots_[from].meta.load(kRelaxed), kRelaxed);
}

CUXFER_HOT uint32_t AllocationTable::lower_bound(uint64_t key, uint32_t n) const {
  uint32_t lo = 0, hi = n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (slots_[mid].begin.load(kRelaxed) <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

bool AllocationTable::insert(uint64_t begin, uint64_t bytes, trace::MemKind kind, int8_t device) {
  if (bytes == 0) return true;
  std::lock_guard<RankedMutex> lock(write_mutex_);
  uint32_t n = count_.load(kRelaxed);
  uint32_t pos = lower_bound(begin, n);
  bool replace = pos > 0 && slots_[pos - 1].begin.load(kRelaxed) == begin;
  if (!replace && n == kCapacity) return false;
  write_begin();
  if (replace) {
    --pos;  // a range reused at the same address (freed behind our back): overwrite
  } else {
    for (uint32_t i = n; i > pos; --i) copy_slot(i, i - 1);
    count_.store(n + 1, kRelaxed);
  }
  slots_[pos].begin.store(begin, kRelaxed);
  slots_[pos].end.store(begin + bytes, kRelaxed);
  slots_[pos].meta.store(static_cast<uint32_t>(kind) | (static_cast<uint8_t>(device) << 8), kRelaxed);
  write_end();
  return true;
}

std::optional<Allocation> AllocationTable::erase(uint64_t begin) {
  std::lock_guard<RankedMutex> lock(write_mutex_);
  uint32_t n = count_.load(kRelaxed);
  uint32_t pos = lower_bound(begin, n);
  if (pos == 0 || slots_[pos - 1].begin.load(kRelaxed) != begin) return std::nullopt;
  --pos;
  uint32_t meta = slots_[pos].meta.load(kRelaxed);
  Allocation a{begin, slots_[pos].end.load(kRelaxed), static_cast<trace::MemKind>(meta & 0xff),
               static_cast<int8_t>(meta >> 8)};
  write_begin();
  for (uint32_t i = pos; i + 1 < n; ++i) copy_slot(i, i + 1);
  count_.store(n - 1, kRelaxed);
  write_end();
  return a;
}

CUXFER_HOT std::optional<Allocation> AllocationTable::find(uint64_t ptr) const {
  unsigned spins = 0;
  for (;; spin_relax(spins)) {
    uint64_t s1 = seq_.load(std::memory_order_acquire);
    if (s1 & 1) continue;  // a writer is mid-update
    uint32_t n = count_.load(kRelaxed);
    if (n > kCapacity) continue;
    uint32_t pos = lower_bound(ptr, n);
    Allocation a;
    bool hit = false;
    if (pos > 0) {
      const Slot& s = slots_[pos - 1];
      a.begin = s.begin.load(kRelaxed);
      a.end = s.end.load(kRelaxed);
      uint32_t meta = s.meta.load(kRelaxed);
      a.kind = static_cast<trace::MemKind>(meta & 0xff);
      a.device = static_cast<int8_t>(meta >> 8);
      hit = ptr >= a.begin && ptr < a.end;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq_.load(kRelaxed) != s1) continue;
    if (hit) return a;
    return std::nullopt;
  }
}

void AllocationTable::clear() {
  std::lock_guard<RankedMutex> lock(write_mutex_);
  write_begin();
  count_.store(0, kRelaxed);
  write_end();
}

}  // namespace cuxfer::shim
