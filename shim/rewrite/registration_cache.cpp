#include "rewrite/registration_cache.h"

#include <algorithm>
#include <new>

namespace cuxfer::shim::rewrite {

RegistrationCache::Map::iterator RegistrationCache::first_overlap(uint64_t begin, uint64_t end) {
  auto it = map_.upper_bound(begin);
  if (it != map_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > begin) return prev;
  }
  return it != map_.end() && it->first < end ? it : map_.end();
}

Cover RegistrationCache::lookup(uint64_t p, uint64_t n) {
  if (empty()) return Cover::None;
  const uint64_t end = p + std::max<uint64_t>(n, 1);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = first_overlap(p, end);
  if (it == map_.end()) return Cover::None;
  if (it->second.state == State::Live && it->first <= p && it->second.end >= end) {
    it->second.last_use = ++clock_;
    return Cover::Covers;
  }
  return Cover::Touches;
}

void RegistrationCache::drop(std::unique_lock<std::mutex>& lock, std::vector<uint64_t>& victims) {
  if (victims.empty()) return;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  ranges.reserve(victims.size());
  for (uint64_t b : victims) {
    Entry& e = map_.at(b);
    e.state = State::Dying;
    ranges.emplace_back(b, e.end);
  }
  lock.unlock();
  for (auto [b, e] : ranges) {
    ops_.on_unregistered(b, e);
    ops_.unregister_range(b);  // an error means CUDA already dropped it (e.g. context gone)
  }
  lock.lock();
  for (auto [b, e] : ranges) {
    bytes_ -= e - b;
    map_.erase(b);
  }
  count_.store(static_cast<uint32_t>(map_.size()), std::memory_order_release);
  settled_.notify_all();
}

AddResult RegistrationCache::add(uint64_t begin, uint64_t end) {
  AddResult r;
  r.status = -1;
  uint64_t b = begin & ~(page_ - 1);
  uint64_t e = (end + page_ - 1) & ~(page_ - 1);
  std::unique_lock<std::mutex> lock(mutex_);
  // Merge: the union of every registration the new range overlaps.
  std::vector<uint64_t> merged;
  for (auto it = first_overlap(b, e); it != map_.end() && it->first < e; ++it) {
    if (it->second.state != State::Live) return r;  // another thread is changing it: not now
    merged.push_back(it->first);
    b = std::min(b, it->first);
    e = std::max(e, it->second.end);
  }
  uint64_t merged_bytes = 0;
  for (uint64_t m : merged) merged_bytes += map_.at(m).end - m;
  const uint64_t need = e - b;
  if (need > budget_) return r;
  // Evict least recently used live entries (not the merged ones) until it fits.
  std::vector<uint64_t> evict;
  uint64_t projected = bytes_ - merged_bytes;
  while (projected + need > budget_) {
    auto lru = map_.end();
    for (auto it = map_.begin(); it != map_.end(); ++it) {
      if (it->second.state != State::Live || std::find(merged.begin(), merged.end(), it->first) != merged.end() ||
          std::find(evict.begin(), evict.end(), it->first) != evict.end())
        continue;
      if (lru == map_.end() || it->second.last_use < lru->second.last_use) lru = it;
    }
    if (lru == map_.end()) return r;  // the rest is pending or dying: no room now
    evict.push_back(lru->first);
    r.evicted_bytes += lru->second.end - lru->first;
    projected -= lru->second.end - lru->first;
  }
  std::vector<uint64_t> victims = merged;
  victims.insert(victims.end(), evict.begin(), evict.end());
  r.unregistered = static_cast<uint32_t>(victims.size());
  drop(lock, victims);
  // The range may have been taken meanwhile by another thread's registration.
  if (first_overlap(b, e) != map_.end() || bytes_ + need > budget_) return r;
  map_.emplace(b, Entry{e, ++clock_, State::Pending});
  bytes_ += need;
  count_.store(static_cast<uint32_t>(map_.size()), std::memory_order_release);
  lock.unlock();
  int status = ops_.register_range(b, need);
  if (status == 0) ops_.on_registered(b, e);
  lock.lock();
  if (status == 0) {
    map_.at(b).state = State::Live;
  } else {
    bytes_ -= need;
    map_.erase(b);
    count_.store(static_cast<uint32_t>(map_.size()), std::memory_order_release);
  }
  settled_.notify_all();
  r.status = status;
  r.begin = b;
  r.end = e;
  return r;
}

uint32_t RegistrationCache::invalidate(uint64_t begin, uint64_t end) {
  if (empty() || end <= begin) return 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    std::vector<uint64_t> victims;
    bool busy = false;
    for (auto it = first_overlap(begin, end); it != map_.end() && it->first < end; ++it) {
      if (it->second.state == State::Live) victims.push_back(it->first);
      else busy = true;
    }
    if (!busy) {
      drop(lock, victims);
      return static_cast<uint32_t>(victims.size());
    }
    // Another thread is registering or unregistering memory that is going
    // away now: wait until it settles, so that nothing is left registered.
    settled_.wait(lock);
  }
}

uint32_t RegistrationCache::clear() { return invalidate(0, ~0ull); }

void RegistrationCache::forget_all_after_fork() {
  // The parent's lock may be held by a thread that does not exist here.
  new (&mutex_) std::mutex;
  new (&settled_) std::condition_variable;
  map_.clear();
  bytes_ = 0;
  count_.store(0, std::memory_order_release);
}

uint64_t RegistrationCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace cuxfer::shim::rewrite
