// The order in which the slots of a fixed-capacity, insert-only table became
// ready, for the one thread that emits them (the call-site and code tables'
// writer). Collecting what is new then costs what is new: scanning the whole
// table instead touched every entry (the call-site table is 4 MiB) in every
// writer cycle, 20 times a second, evicting the program's own data from the
// caches for nothing.
//
// publish() is lock-free, any thread, once per id; drain() and rewind() are
// the single consumer's. An id whose position is taken but not yet stored
// stops a drain there; the next drain goes on from it.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace cuxfer::shim {

class PublishOrder {
 public:
  explicit PublishOrder(uint32_t capacity)
      // Zeroed pages from the kernel: touched only as ids are published.
      : ids_(static_cast<std::atomic<uint32_t>*>(std::calloc(capacity, sizeof(std::atomic<uint32_t>)))),
        capacity_(ids_ ? capacity : 0) {}
  ~PublishOrder() { std::free(ids_); }
  PublishOrder(const PublishOrder&) = delete;
  PublishOrder& operator=(const PublishOrder&) = delete;

  // `id` (>= 1) is ready. Each id once: at most `capacity` in all (more are ignored).
  void publish(uint32_t id) noexcept {
    const uint32_t at = next_.fetch_add(1, std::memory_order_relaxed);
    if (at < capacity_) ids_[at].store(id, std::memory_order_release);
  }
  // Calls f(id) for each id published since the last drain, in order.
  template <typename F>
  void drain(F&& f) {
    while (cursor_ < capacity_) {
      const uint32_t id = ids_[cursor_].load(std::memory_order_acquire);
      if (id == 0) return;
      f(id);
      ++cursor_;
    }
  }
  // The next drain starts again from the first id (a fork child's new trace).
  void rewind() noexcept { cursor_ = 0; }

 private:
  std::atomic<uint32_t>* ids_;
  uint32_t capacity_;
  std::atomic<uint32_t> next_{0};
  uint32_t cursor_ = 0;  // consumer only
};

}  // namespace cuxfer::shim
