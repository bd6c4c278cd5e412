#include "record/event_ring.h"

#include <cstdlib>
#include <new>

namespace cuxfer::shim {

EventRing::EventRing(uint32_t capacity_pow2)
    // Untouched pages cost no resident memory until events fill them. Each
    // event one whole cache line: a push never splits a store across two.
    : slots_(static_cast<trace::Event*>(std::aligned_alloc(64, sizeof(trace::Event) * capacity_pow2))),
      mask_(capacity_pow2 - 1) {
  // Each ring its own sequence of timed calls (never 0: xorshift would stay there).
  hook_rng_ ^= reinterpret_cast<uintptr_t>(this);
  if (hook_rng_ == 0) hook_rng_ = 1;
}

EventRing::~EventRing() { std::free(slots_); }

size_t EventRing::drain(std::vector<trace::Event>& out) {
  uint64_t tail = tail_.load(std::memory_order_relaxed);
  uint64_t head = head_.load(std::memory_order_acquire);
  for (uint64_t i = tail; i < head; ++i) out.push_back(slots_[i & mask_]);
  tail_.store(head, std::memory_order_release);
  return static_cast<size_t>(head - tail);
}

void EventRing::reset() {
  head_.store(0, std::memory_order_relaxed);
  tail_.store(0, std::memory_order_relaxed);
  tail_cache_ = 0;
  dropped_.store(0, std::memory_order_relaxed);
}

void EventRing::forget_hook_time() {
  hook_calls_.store(0, std::memory_order_relaxed);
  hook_timed_.store(0, std::memory_order_relaxed);
  hook_ns_.store(0, std::memory_order_relaxed);
  hook_stack_ns_.store(0, std::memory_order_relaxed);
  hook_python_ns_.store(0, std::memory_order_relaxed);
  hook_native_ns_.store(0, std::memory_order_relaxed);
  hook_max_ns_.store(0, std::memory_order_relaxed);
  for (auto& b : hook_hist_) b.store(0, std::memory_order_relaxed);
}

EventRing* RingRegistry::acquire() {
  for (EventRing* r = head_.load(std::memory_order_acquire); r; r = r->next) {
    int expected = EventRing::kFree;
    if (r->state.compare_exchange_strong(expected, EventRing::kOwned, std::memory_order_acq_rel))
      return r;
  }
  auto* r = new (std::nothrow) EventRing(capacity_);
  if (r && !r->usable()) {  // its slots could not be allocated: this thread records nothing
    delete r;
    r = nullptr;
  }
  if (!r) return nullptr;
  r->next = head_.load(std::memory_order_relaxed);
  while (!head_.compare_exchange_weak(r->next, r, std::memory_order_release,
                                      std::memory_order_relaxed)) {
  }
  return r;
}

}  // namespace cuxfer::shim
