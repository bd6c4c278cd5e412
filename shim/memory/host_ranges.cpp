#include "memory/host_ranges.h"
#include "core/export.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace cuxfer::shim {

uint32_t HostRanges::first_ending_after(uint64_t p) const {
  // Ranges are disjoint and sorted, so their ends are sorted too.
  uint32_t lo = 0, hi = count_;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (ranges_[mid].end > p) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

void HostRanges::erase_at(uint32_t i) {
  std::memmove(&ranges_[i], &ranges_[i + 1], (count_ - i - 1) * sizeof(Range));
  --count_;
  published_count_.store(count_, std::memory_order_relaxed);
}

bool HostRanges::track(uint64_t begin, uint64_t bytes, HostSource source) {
  if (bytes == 0 || begin + bytes < begin) return false;
  const uint64_t end = begin + bytes;
  std::lock_guard<RankedMutex> lock(mutex_);
  uint32_t i = first_ending_after(begin);
  while (i < count_ && ranges_[i].begin < end) erase_at(i);  // stale: that memory was reused
  if (count_ == kCapacity) return false;
  std::memmove(&ranges_[i + 1], &ranges_[i], (count_ - i) * sizeof(Range));
  ranges_[i] = Range{begin, end, 0, 0, source, false};
  ++count_;
  published_count_.store(count_, std::memory_order_relaxed);
  return true;
}

bool HostRanges::untrack_exact(uint64_t begin, uint64_t* end) {
  std::lock_guard<RankedMutex> lock(mutex_);
  uint32_t i = first_ending_after(begin);
  if (i == count_ || ranges_[i].begin != begin) return false;
  if (end) *end = ranges_[i].end;
  erase_at(i);
  return true;
}

uint32_t HostRanges::untrack_overlapping(uint64_t begin, uint64_t end, uint64_t* lo, uint64_t* hi) {
  std::lock_guard<RankedMutex> lock(mutex_);
  uint32_t n = 0;
  uint32_t i = first_ending_after(begin);
  while (i < count_ && ranges_[i].begin < end) {
    if (lo) *lo = std::min(*lo, ranges_[i].begin);
    if (hi) *hi = std::max(*hi, ranges_[i].end);
    erase_at(i);
    ++n;
  }
  return n;
}

HostSource HostRanges::source_of(uint64_t p) const {
  std::lock_guard<RankedMutex> lock(mutex_);
  uint32_t i = first_ending_after(p);
  return i < count_ && ranges_[i].begin <= p ? ranges_[i].source : HostSource{};
}

RegisterVerdict HostRanges::note_copy(uint64_t p, uint64_t n, uint64_t max_bytes) {
  RegisterVerdict v;
  std::lock_guard<RankedMutex> lock(mutex_);
  uint32_t i = first_ending_after(p);
  if (i == count_ || ranges_[i].begin > p || ranges_[i].end < p + n) return v;
  Range& r = ranges_[i];
  v.tracked = true;
  v.begin = r.begin;
  v.end = r.end;
  v.forbidden = r.forbidden;
  r.copied += n;
  r.copies += 1;
  const uint64_t size = r.end - r.begin;
  v.register_now = !r.forbidden && r.copies >= 2 && r.copied >= 2 * size && size <= max_bytes;
  return v;
}

void HostRanges::forbid(uint64_t begin, uint64_t end) {
  std::lock_guard<RankedMutex> lock(mutex_);
  for (uint32_t i = first_ending_after(begin); i < count_ && ranges_[i].begin < end; ++i) ranges_[i].forbidden = true;
}

uint32_t HostRanges::size() const {
  std::lock_guard<RankedMutex> lock(mutex_);
  return count_;
}

void HostRanges::clear() {
  std::lock_guard<RankedMutex> lock(mutex_);
  count_ = 0;
  published_count_.store(0, std::memory_order_relaxed);
}

namespace detail {
std::atomic<uint64_t> g_track_min{0};
}  // namespace detail

void enable_host_tracking(uint64_t min_bytes) { detail::g_track_min.store(min_bytes, std::memory_order_relaxed); }

HostRanges& host_ranges() {
  // Placement in static storage: usable from the first malloc, before any
  // constructor has run, and never destroyed (free() may run after exit handlers).
  alignas(HostRanges) CUXFER_LARGE_BSS static unsigned char storage[sizeof(HostRanges)];
  static HostRanges* table = new (storage) HostRanges;
  return *table;
}

}  // namespace cuxfer::shim
