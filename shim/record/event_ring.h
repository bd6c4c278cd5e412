// Per-thread event buffers. Each app thread owns one single-producer/
// single-consumer ring; the writer thread drains them all. Pushing is two
// relaxed loads, a copy and a release store: no lock, no allocation, no
// system call. A full ring drops the event and counts it, so a stalled writer
// can never block or slow the app, and memory stays bounded.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "trace/event.h"
#include "core/export.h"

namespace cuxfer::shim {
// What one timed call's stack capture took, by part (call_scope.h).
struct StackTimes {
  uint64_t total_ns = 0;   // the whole capture, interning included
  uint64_t python_ns = 0;  // the Python frames' walk
  uint64_t native_ns = 0;  // the native frames' walk
};
}  // namespace cuxfer::shim

namespace cuxfer::shim {

class EventRing {
 public:
  enum State : int { kFree = 0, kOwned = 1, kOrphaned = 2 };

  explicit EventRing(uint32_t capacity_pow2);
  ~EventRing();
  // False when its slots could not be allocated (out of memory).
  bool usable() const { return slots_ != nullptr; }
  EventRing(const EventRing&) = delete;
  EventRing& operator=(const EventRing&) = delete;

  // Producer side (owning thread only).
  bool push(const trace::Event& e) {
    uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ > mask_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ > mask_) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    }
    slots_[head & mask_] = e;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // What the shim's own work in the hooks cost this ring's threads (owning
  // thread writes, anyone reads): every call counted, about one in
  // kHookTimeEvery timed. count_hook_call() says whether this call is one to
  // time. The gaps between timed calls are random (1 to 2 * kHookTimeEvery - 1,
  // mean kHookTimeEvery): a fixed stride would alias with anything periodic
  // in the calls, such as this ring's slots reaching a new page every 64
  // events, and time only the calls that pay for it.
  static constexpr uint32_t kHookTimeEvery = 64;
  CUXFER_HOT bool count_hook_call() {
    hook_calls_.store(hook_calls_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (--hook_countdown_ != 0) return false;
    hook_rng_ ^= hook_rng_ << 13;  // xorshift64
    hook_rng_ ^= hook_rng_ >> 7;
    hook_rng_ ^= hook_rng_ << 17;
    hook_countdown_ = static_cast<uint32_t>((hook_rng_ >> 33) % (2 * kHookTimeEvery - 1)) + 1;
    return true;
  }
  // Bucket b of the histogram holds the timed calls of [2^b, 2^(b+1)) ns (b 0: 0-1 ns).
  // `stack`: of `ns`, the call stack's capture, by part (what --stack-depth,
  // CUXFER_PYTHON_NATIVE_DEPTH and CUXFER_PYTHON_STACKS trade against the
  // report's detail).
  static constexpr uint32_t kHookHistBuckets = 40;
  CUXFER_HOT void add_hook_time(uint64_t ns, const StackTimes& stack = {}) {
    hook_timed_.store(hook_timed_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    hook_ns_.store(hook_ns_.load(std::memory_order_relaxed) + ns, std::memory_order_relaxed);
    auto add = [](std::atomic<uint64_t>& a, uint64_t v) { a.store(a.load(std::memory_order_relaxed) + v, std::memory_order_relaxed); };
    add(hook_stack_ns_, stack.total_ns);
    add(hook_python_ns_, stack.python_ns);
    add(hook_native_ns_, stack.native_ns);
    if (ns > hook_max_ns_.load(std::memory_order_relaxed)) hook_max_ns_.store(ns, std::memory_order_relaxed);
    uint32_t b = ns ? 63 - static_cast<uint32_t>(__builtin_clzll(ns)) : 0;
    if (b >= kHookHistBuckets) b = kHookHistBuckets - 1;
    hook_hist_[b].store(hook_hist_[b].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  uint64_t hook_max_ns() const { return hook_max_ns_.load(std::memory_order_relaxed); }
  uint64_t hook_hist(uint32_t bucket) const { return hook_hist_[bucket].load(std::memory_order_relaxed); }
  uint64_t hook_calls() const { return hook_calls_.load(std::memory_order_relaxed); }
  uint64_t hook_timed() const { return hook_timed_.load(std::memory_order_relaxed); }
  uint64_t hook_ns() const { return hook_ns_.load(std::memory_order_relaxed); }
  uint64_t hook_stack_ns() const { return hook_stack_ns_.load(std::memory_order_relaxed); }
  uint64_t hook_python_ns() const { return hook_python_ns_.load(std::memory_order_relaxed); }
  uint64_t hook_native_ns() const { return hook_native_ns_.load(std::memory_order_relaxed); }

  // Consumer side (writer thread only). Appends what is there, returns count.
  size_t drain(std::vector<trace::Event>& out);
  uint64_t take_dropped() { return dropped_.exchange(0, std::memory_order_relaxed); }
  // Events waiting to be drained (approximate while the producer runs).
  size_t size() const {
    return static_cast<size_t>(head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_relaxed));
  }
  bool empty() const {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_relaxed);
  }
  // Forget the events (a ring recycled for a new thread; the fork child: the
  // parent's events are the parent's to write). The hook-time sums stay: they
  // add up every thread the ring served, the exited ones too.
  void reset();
  // Forget the hook-time sums (the fork child: the parent's calls are not its own).
  void forget_hook_time();

  std::atomic<int> state{kOwned};
  EventRing* next = nullptr;  // registry list, immutable once published

 private:
  // The producer's line: all that a push and count_hook_call() touch, so that
  // a call reads one line here, not three (after a training step's framework
  // code each of this ring's lines is cold: on the H200's loop the phase probe
  // put a push, with the slots' address on another line, at 0.4-0.5 us;
  // docs/benchmarks.md, nineteenth session).
  alignas(64) std::atomic<uint64_t> head_{0};
  uint64_t tail_cache_ = 0;  // producer's view of tail
  trace::Event* const slots_;
  const uint64_t mask_;  // capacity - 1
  std::atomic<uint64_t> hook_calls_{0};
  uint64_t hook_rng_ = 0x9E3779B97F4A7C15ull;
  uint32_t hook_countdown_ = kHookTimeEvery;  // calls to the next timed one
  // The timed calls' sums (about one call in kHookTimeEvery), read at shutdown only.
  alignas(64) std::atomic<uint64_t> hook_timed_{0}, hook_ns_{0}, hook_max_ns_{0}, hook_stack_ns_{0};
  std::atomic<uint64_t> hook_python_ns_{0}, hook_native_ns_{0};
  std::atomic<uint64_t> hook_hist_[kHookHistBuckets] = {};
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::atomic<uint64_t> dropped_{0};
};

// The set of all rings. Rings are reused by new threads once drained after
// their thread exited, so memory is bounded by the peak number of threads.
class RingRegistry {
 public:
  explicit RingRegistry(uint32_t capacity) : capacity_(capacity) {}
  EventRing* acquire();  // for the calling thread (allocates only when none is free)
  template <typename F>
  void for_each(F&& f) {
    for (EventRing* r = head_.load(std::memory_order_acquire); r; r = r->next) f(*r);
  }

 private:
  uint32_t capacity_;
  std::atomic<EventRing*> head_{nullptr};
};

}  // namespace cuxfer::shim
