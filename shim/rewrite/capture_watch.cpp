#include "rewrite/capture_watch.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "record/recorder.h"
#include "symbols/cuda_headers.h"

namespace cuxfer::shim::rewrite {

namespace detail {
std::atomic<uint32_t> g_open_global_captures{0};
std::atomic<uint64_t> g_global_captures_seen{0};
}

namespace {

// Streams with an open global capture; 0 is a free slot. An app captures a
// handful of streams at once; one that captures more keeps the rewrite aside
// until the process ends (the count is raised for good).
constexpr int kSlots = 64;
std::atomic<uint64_t> g_slots[kSlots];
std::atomic<uint64_t> g_copies_left{0};

}  // namespace

uint64_t capture_key(uint64_t s, bool per_thread) {
  const bool thread_stream = s == reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD) || (s == 0 && per_thread);
  if (!thread_stream) return s;
  // Never a real handle (handles are pointers): the low bit set, the thread above it.
  return (static_cast<uint64_t>(syscall(SYS_gettid)) << 8) | 0x3;
}

void global_capture_began(uint64_t key) {
  if (key == 0) key = 0x1;  // the legacy stream is never captured; keep 0 for "free"
  detail::g_global_captures_seen.fetch_add(1, std::memory_order_acq_rel);
  detail::g_open_global_captures.fetch_add(1, std::memory_order_acq_rel);
  for (auto& slot : g_slots) {
    uint64_t expected = 0;
    if (slot.compare_exchange_strong(expected, key, std::memory_order_acq_rel)) return;
  }
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    Recorder::instance().note("rewrite: pin: more than 64 graph captures open at once; copies pass through untouched "
                              "for the rest of the run");
}

void global_capture_ended(uint64_t key) {
  if (key == 0) key = 0x1;
  for (auto& slot : g_slots) {
    uint64_t expected = key;
    if (slot.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) {
      detail::g_open_global_captures.fetch_sub(1, std::memory_order_acq_rel);
      return;
    }
  }
}

void copy_left_beside_capture() { g_copies_left.fetch_add(1, std::memory_order_relaxed); }
uint64_t copies_left_beside_captures() { return g_copies_left.load(std::memory_order_relaxed); }

void forget_captures_after_fork() {
  for (auto& slot : g_slots) slot.store(0, std::memory_order_relaxed);
  detail::g_open_global_captures.store(0, std::memory_order_release);
  detail::g_global_captures_seen.store(0, std::memory_order_release);
}

}  // namespace cuxfer::shim::rewrite
