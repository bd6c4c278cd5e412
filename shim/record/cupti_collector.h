// GPU-side timing from CUPTI activity records. libcupti is loaded at run time
// (never linked), so a machine without it, an app whose profiler already holds
// CUPTI, or the simulated CUDA all degrade to CPU timing with a stated reason.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/hot_line.h"
#include "core/bounded_lock.h"
#include "core/ranked_lock.h"
#include "record/cupti_locate.h"

// The driver's handle types (cuda.h: CUcontext, CUstream), without cuda.h:
// its declarations and cupti.h's cannot meet in one translation unit here.
struct CUctx_st;
struct CUstream_st;
#include "trace/event.h"

namespace cuxfer::shim {

class CuptiCollector {
 public:
  // Loads libcupti and enables memcpy and memset records.
  // On failure returns false and says why in `reason` (one line).
  // `candidates`: where to look, first first (record/cupti_locate.h).
  bool start(const std::vector<CuptiCandidate>& candidates, std::string& reason);
  // The libcupti started from, and why it was looked for there ("" before).
  const std::string& library() const { return library_; }
  const std::string& library_why() const { return library_why_; }
  bool active() const { return g_hot_line.cupti_active.load(std::memory_order_acquire); }

  // Unified-memory counters (migrations, CPU and GPU page faults). CUPTI
  // wants the driver initialized first, so this runs after the app's first
  // managed allocation. Returns false with a one-line reason.
  bool enable_unified_memory(std::string& reason);

  // Turns CUPTI's memcpy and memset records on or off (the governor,
  // cupti_governor.h). False when the collector is not active (never
  // started, handed over) or CUPTI refused: nothing changed then. Turning
  // them on while detached attaches CUPTI again first.
  bool set_copy_records(bool on);

  // Detaches CUPTI from the process (cuptiFinalize) while the copy records
  // are off: attached and idle, CUPTI still costs every copy call about
  // 0.5 us. Only when the memcpy and memset records are all the collector
  // asked for (kernel and unified-memory records need CUPTI attached), and
  // only from the writer thread, after the records went off at least one
  // window earlier (the governor's may_detach): CUPTI wants the work done and
  // its buffers flushed before it is finalized, and every CUPTI call the
  // collector makes is serialized under one lock, so none races the
  // finalize (PyTorch's Kineto crashed in cuptiActivityFlushAll that way).
  // Returns true when CUPTI was detached by this call.
  bool detach();
  bool detached() const { return detached_.load(std::memory_order_acquire); }

  // The shim's own warm-up copies (record/cupti_warmup.h): their memcpy
  // records are dropped as they arrive, by CUPTI's ids of the warm-up's
  // context and stream. `ignore_stream_of` looks the ids up (false when this
  // libcupti cannot, or CUPTI is detached or handed over: the caller then
  // makes no warm-up copy) and adds them, under the hand-over lock.
  bool ignore_stream_of(CUctx_st* ctx, CUstream_st* stream);
  // Warm-up records dropped so far.
  uint64_t ignored_records() const { return ignored_records_.load(std::memory_order_relaxed); }

  // Ask CUPTI to hand over completed buffers (forced: also the partial ones).
  void flush(bool forced);
  // Writer thread: move out what has arrived.
  void take(std::vector<trace::GpuRecord>& out, uint64_t& dropped);
  // Final flush and disable (at exit).
  void stop();
  // Records left out because their work had not finished when a forced flush
  // handed them over (their timestamps are zero): the copy counts as one
  // whose record went missing, never as a time.
  uint64_t incomplete_records() const { return incomplete_.load(std::memory_order_relaxed); }
  // Held across fork() (CUPTI's thread may be delivering a buffer; the
  // writer may be detaching or attaching CUPTI). In the order they nest.
  // Both or neither by `deadline_ns` (the writer holds them across CUPTI's
  // flush, attach and detach: core/bounded_lock.h); true when held.
  bool lock_for_fork(uint64_t deadline_ns) {
    if (!lock_before(handover_mutex_, deadline_ns)) return false;
    if (lock_before(mutex_, deadline_ns)) return true;
    handover_mutex_.unlock();
    return false;
  }
  void unlock_after_fork() {
    mutex_.unlock();
    handover_mutex_.unlock();
  }
  // Fork child of a fork that went ahead without them (lock_for_fork false):
  // the locks unlocked again, CUPTI no longer used, and nothing they guard
  // touched (the writer may have been changing it).
  void forsake_after_fork() {
    remake_in_fork_child(handover_mutex_);
    remake_in_fork_child(mutex_);
    g_hot_line.cupti_active.store(false, std::memory_order_release);
  }
  // The app is about to take CUPTI for its own profiler (`call` is the CUPTI
  // function it called, `real` the function it will reach). When `real` is
  // in the libcupti the collector uses, the collector stops its activity
  // kinds, has CUPTI hand back every buffer it holds, and stops; the app's
  // callbacks then see only buffers the app gave out. Before the collector
  // has started, it remembers that CUPTI is the app's and never starts.
  // Returns true when GPU records stop here (the caller notes it).
  bool hand_over(const char* call, const void* real);
  // The libcupti function `name` of the library the collector uses, if loaded.
  void* own_symbol(const char* name) const;

  // Fork child: CUPTI state does not survive fork; stop using it and drop
  // records that belong to the parent.
  void abandon_after_fork() {
    g_hot_line.cupti_active.store(false, std::memory_order_release);
    pending_.clear();
  }

  static CuptiCollector& instance();

  // Called from CUPTI's buffer callback (internal).
  void consume_buffer(uint8_t* buffer, size_t valid_bytes);

 private:
  // Registers the callbacks and enables the kinds in `enabled_kinds_` (the
  // start, and every re-attach after detach()). Caller holds handover_mutex_.
  bool attach(std::string& reason);

  // Whether CUPTI is in use lives on the hot line (g_hot_line.cupti_active): every recorded copy reads it.
  std::atomic<uint64_t> incomplete_{0};
  // (context id << 32 | stream id) of the warm-up streams; lock-free, a
  // handful at most (one per context, kMaxIgnored in all).
  static constexpr size_t kMaxIgnored = 16;
  std::atomic<uint64_t> ignored_[kMaxIgnored] = {};
  std::atomic<uint32_t> ignored_count_{0};
  std::atomic<uint32_t> ignored_live_{0};  // entries whose record has not come yet
  std::atomic<uint64_t> ignored_records_{0};
  static constexpr uint64_t kIgnoredUsed = ~uint64_t{0};  // an entry whose record came
  // True (once) for the record of a warm-up stream; the entry is used up.
  bool take_ignored(uint32_t context_id, uint32_t stream_id);
  std::atomic<bool> detached_{false};  // ours, but cuptiFinalize'd until the records are wanted again
  void* lib_ = nullptr;                 // our dlopen handle of libcupti
  std::string library_, library_why_;   // its path, and why there
  RankedMutex handover_mutex_{LockRank::kCuptiHandover};         // start() and hand_over() do not interleave
  std::string app_owner_;               // non-empty: the app took CUPTI before we started
  std::vector<int> enabled_kinds_;      // what hand_over() turns off again
  RankedMutex mutex_{LockRank::kCuptiRecords};
  std::vector<trace::GpuRecord> pending_;
  uint64_t dropped_ = 0;
};

}  // namespace cuxfer::shim
