// GPU-side timing from CUPTI activity records. libcupti is loaded at run time
// (never linked), so a machine without it, an app whose profiler already holds
// CUPTI, or the simulated CUDA all degrade to CPU timing with a stated reason.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "trace/event.h"

namespace cuxfer::shim {

class CuptiCollector {
 public:
  // Loads libcupti and enables memcpy and memset records.
  // On failure returns false and says why in `reason` (one line).
  bool start(const std::string& library_override, std::string& reason);
  bool active() const { return active_.load(std::memory_order_acquire); }

  // Unified-memory counters (migrations, CPU and GPU page faults). CUPTI
  // wants the driver initialized first, so this runs after the app's first
  // managed allocation. Returns false with a one-line reason.
  bool enable_unified_memory(std::string& reason);

  // Ask CUPTI to hand over completed buffers (forced: also the partial ones).
  void flush(bool forced);
  // Writer thread: move out what has arrived.
  void take(std::vector<trace::GpuRecord>& out, uint64_t& dropped);
  // Final flush and disable (at exit).
  void stop();
  // Held across fork() (CUPTI's thread may be delivering a buffer).
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }
  // Fork child: CUPTI state does not survive fork; stop using it and drop
  // records that belong to the parent.
  void abandon_after_fork() {
    active_.store(false, std::memory_order_release);
    pending_.clear();
  }

  static CuptiCollector& instance();

  // Called from CUPTI's buffer callback (internal).
  void consume_buffer(uint8_t* buffer, size_t valid_bytes);

 private:
  std::atomic<bool> active_{false};
  std::mutex mutex_;
  std::vector<trace::GpuRecord> pending_;
  uint64_t dropped_ = 0;
};

}  // namespace cuxfer::shim
