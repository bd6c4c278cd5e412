// The recording side of the shim: per-thread state, the rings the hooks push
// events into, and the session that owns the trace file and its writer thread.
// The session starts lazily at the first intercepted data call, so processes
// that never use CUDA (shells, compilers, DataLoader helpers) write nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "core/quiet_thread.h"
#include "core/event_clock.h"
#include "core/export.h"
#include "core/hot_line.h"
#include "core/ranked_lock.h"
#include "record/call_desc.h"
#include "record/callsite_table.h"
#include "record/capture_range.h"
#include "record/correlation_ids.h"
#include "record/cupti_governor.h"
#include "record/hook_time.h"
#include "record/event_ring.h"
#include "record/module_snapshot.h"
#include "trace/event.h"
#include "trace/writer.h"

namespace cuxfer::shim {

// Per-thread state; trivially destructible so it lives in static TLS.
struct ThreadState {
  uint32_t tid = 0;
  uint32_t internal = 0;        // >0: the shim itself is calling CUDA/CUPTI; hooks pass through
  bool in_call = false;         // a hook owns the current user call
  bool runtime_owner = false;   // ... and it is a runtime-layer hook
  bool driver_seen = false;     // a driver hook ran inside the owning runtime call
  bool driver_contributed = false;  // ... and described the transfer
  bool mapped = false;          // the zero-copy path made the current allocation
  bool multi_piece = false;     // the runtime call reached the driver as several copies
  CallDesc desc;                // what the current user call does (classified at its end)
  trace::Event pending{};       // the event being built for the current user call (the rewrite's
                                // executor adds the path that ran to its flags)
  EventRing* ring = nullptr;
  CorrelationBlock correlation;  // this thread's block of correlation ids
  bool driver_attached = false;  // this thread saw Recorder's driver setup done (a fork child's is not)
  // NVTX ranges open on this thread, outermost first (record/nvtx_ranges.h);
  // deeper ones are counted in nvtx_depth, not kept. nvtx_changed: the stack
  // changed since the trace last heard of it.
  static constexpr uint32_t kNvtxMaxDepth = 64;
  uint32_t nvtx_depth = 0;
  bool nvtx_changed = false;
  uint32_t nvtx_names[kNvtxMaxDepth] = {};
};

ThreadState& thread_state();

// RAII marker for the shim's own CUDA/CUPTI calls.
class InternalScope {
 public:
  InternalScope() : ts_(thread_state()) { ++ts_.internal; }
  ~InternalScope() { --ts_.internal; }

 private:
  ThreadState& ts_;
};

class Recorder {
 public:
  // Made at the first call; its address then read from the hot line (a
  // function-local static is a guard's line, then the pointer's).
  CUXFER_INLINE static Recorder& instance() {
    Recorder* r = g_hot_line.recorder.load(std::memory_order_acquire);
    return r ? *r : make_instance();
  }

  // What the layers above the recorder (the rewrite) do at its shutdown and
  // in a fork child, at the point of each that they need: the recorder does
  // not include them (the dependency goes hook -> rewrite -> record). Set once
  // at load by the shim's constructor (lifecycle.cpp), which knows both.
  struct Dependents {
    void (*before_shutdown)() = nullptr;  // before the writer stops: the rewrite's last events are recorded
    void (*in_fork_child)() = nullptr;    // after the child's locks are released, before its trace state resets
    void (*at_start)() = nullptr;         // once the trace is open and recording (the app's thread)
    void (*before_fork)() = nullptr;      // in the parent, first in the fork handler, before any lock
  };
  void set_dependents(const Dependents& d) {
    before_shutdown_.store(d.before_shutdown, std::memory_order_release);
    in_fork_child_.store(d.in_fork_child, std::memory_order_release);
    at_start_.store(d.at_start, std::memory_order_release);
    before_fork_.store(d.before_fork, std::memory_order_release);
  }

  // False when the shim is inert (disabled, secure execution) or the trace
  // could not be created; hooks then pass every call straight through.
  bool recording() const { return g_hot_line.recorder_state.load(std::memory_order_acquire) == kRecording; }
  // Opens the trace and starts the writer and CUPTI at the first data call.
  CUXFER_INLINE bool ensure_started() {
    int s = g_hot_line.recorder_state.load(std::memory_order_acquire);
    return s == kRecording || ((s == kIdle || s == kStarting) && start_slow());
  }

  // Driver-dependent setup (simulated-CUDA detection, CUPTI), done at the
  // first driver-layer call, when libcuda is certainly loaded.
  CUXFER_INLINE void ensure_driver_attached() {
    if (driver_state_.load(std::memory_order_acquire) == 0) attach_driver_slow();
  }
  // The same for a hook: a thread that has seen the setup done asks its own
  // state from then on, not the recorder's shared line. Made because a phase
  // probe charged that load ~0.3 us a copy on the H200; measured after, the
  // storm did not change and the probe still charges the step as much, so the
  // cost lies elsewhere (docs/benchmarks.md, seventeenth session).
  CUXFER_INLINE void ensure_driver_attached(ThreadState& ts) {
    if (ts.driver_attached) [[likely]] return;
    ensure_driver_attached();
    ts.driver_attached = driver_state_.load(std::memory_order_acquire) == 2;
  }

  // Inside the capture range: the whole run without one (the default), else
  // between the program's profiler start and stop (record/capture_range.h).
  // Read once per call by the hooks.
  CUXFER_INLINE bool capturing() const { return g_hot_line.capturing.load(std::memory_order_relaxed); }
  // The program called cudaProfilerStart/cuProfilerStart (`start`) or a stop;
  // ignored without a capture range.
  void profiler_call(bool start);

  CUXFER_INLINE uint32_t next_correlation(ThreadState& ts) { return correlation_.next(ts.correlation); }
  CUXFER_INLINE uint32_t stack_depth() const { return g_hot_line.stack_depth; }
  CUXFER_INLINE bool memset_stacks() const { return g_hot_line.memset_stacks; }  // CUXFER_MEMSET_STACKS
  CUXFER_INLINE bool cupti_active() const { return g_hot_line.cupti_active.load(std::memory_order_acquire); }
  // A copy or memset issued now should get a CUPTI record: CUPTI is active
  // and the governor has its copy records on (kFlagGpuExpected).
  CUXFER_INLINE bool gpu_expected() const { return g_hot_line.copy_records_on.load(std::memory_order_acquire) && cupti_active(); }
  bool cupti_forbidden_ = false;  // forked from a process whose CUPTI state cannot be reused
  CallSiteTable& callsites() { return callsites_; }

  // The calling thread's ring, attached at its first use (null: none to be had).
  CUXFER_INLINE EventRing* ring_of(ThreadState& ts) { return ts.ring || attach_ring(ts) ? ts.ring : nullptr; }

  CUXFER_HOT void emit(ThreadState& ts, const trace::Event& e) {
    if (!ts.ring && !attach_ring(ts)) return;
    if (ts.nvtx_changed) [[unlikely]] emit_nvtx_ranges(ts, e);
    ts.ring->push(e);
  }

  // Adds a line to the trace's Notes block and logs it (warn, or info for
  // messages that report a configuration rather than a problem).
  void note(const std::string& msg, bool warning = true);

  // The app allocated managed memory: turn on CUPTI's unified-memory records
  // (once; a note says whether they are on).
  void managed_memory_seen() {
    if (!um_requested_.exchange(true, std::memory_order_acq_rel)) enable_unified_memory_records();
  }

  // The app's profiler took CUPTI from the collector (hand_over() returned
  // true): the trace says when, and GPU records end there.
  void cupti_handed_over(const std::string& reason);
  // dlclose hook, before an object is unloaded: the modules loaded since the
  // last write cycle are written now, so that the copies of a plugin loaded
  // and unloaded between two cycles are still symbolized. Not for the shim's
  // own dlclose calls (internal: they may come under the session lock).
  void before_dlclose();

  // The shim's memory ran out (core/allocation.h): recording stops, every
  // later call passes through, and the trace is finished at exit with what it
  // had and a note saying why it ends early. No allocation, no lock: it runs
  // inside the allocation that failed.
  void stop_for_memory();

  void shutdown();          // at exit: final flush, End block
  // The process ends through _exit or _Exit (os._exit, a multiprocessing fork
  // child), where no exit handler runs: the writer thread finishes the trace
  // (its last events, the notes, the End block) while the caller waits, at
  // most kExitFinishNs, with nothing but atomics, the clock and nanosleep
  // (all async-signal-safe: a signal handler may be the caller). Nothing for
  // a process that is not recording, nor for a vfork child, which shares this
  // process's memory and writer but is not it. `status`: the exit status, for
  // the trace's note.
  void finish_before_exit(int status) noexcept;
  // The process is about to replace its image (execve and the rest of the
  // family, interpose/exec_hooks.cpp): the same finish, the trace's note
  // naming `path` (copied, at most kExecPathMax bytes). After it every hook
  // passes through: an exec that fails leaves the process running unrecorded
  // (said once on stderr by the hook). True when this call ended the trace.
  bool finish_before_exec(const char* path) noexcept;
  // A signal whose default action ends the process without an exit handler
  // (SIGTERM, SIGINT, SIGHUP, SIGPIPE) arrived, and the shim's handler is about to let
  // that action happen (interpose/signal_hooks.cpp): the same finish, the
  // trace's note naming the signal. Async-signal-safe on the caller's side.
  void finish_before_signal(int sig) noexcept;
  static constexpr size_t kExecPathMax = 255;
  // The caller's wait for the writer's answer (async-signal-safe, bounded).
  void await_exit_finish() noexcept;
  static constexpr uint64_t kExitFinishNs = 2'000'000'000;
  void prepare_fork();
  void after_fork_parent();
  void after_fork_child();

 private:
  // kStopped: was recording, stopped by stop_for_memory(); the trace is still open.
  enum : int { kIdle = 0, kStarting = 1, kRecording = 2, kOff = 3, kStopped = 4 };
  Recorder();
  static Recorder& make_instance();
  bool start_slow();
  // Before `next`: the thread's NVTX range stack (EventKind::NvtxRanges).
  void emit_nvtx_ranges(ThreadState& ts, const trace::Event& next);
  bool attach_driver_slow();
  bool attach_ring(ThreadState& ts);
  void enable_unified_memory_records();
  bool open_trace();
  void writer_loop();
  void write_cycle(bool final);
  void write_tail(bool final, std::string& payload);
  void govern_cupti(uint64_t now);  // session_mutex_ held
  // A fork child whose fork went ahead without the writer's locks
  // (prepare_fork): recording off for good, nothing they guard touched.
  void forsake_after_fork_child();
  // How long prepare_fork() waits for the locks the writer holds across CUDA
  // and CUPTI calls (a write cycle holds the session's for a few ms).
  static constexpr uint64_t kForkWaitNs = 250'000'000;
  bool fork_writer_locked_ = false;  // prepare_fork() took them (fork handlers only)
  // Takes the state from recording (or stopped for memory) to off: true for
  // the one caller that ends the trace (shutdown() or an _exit).
  bool claim_end();
  // The writer thread, asked by finish_before_exit(): finishes the trace,
  // says so, and lets the waiting caller go.
  void finish_for_exit();
  // What shutdown() and an _exit do once the writer has stopped cycling: the
  // last notes and the final cycle (End block); the trace file is closed.
  // `bounded`: CUPTI's last flush is waited for only as long as the caller
  // of an _exit, exec or end signal can wait (stop_cupti_bounded); else
  // however long it takes (an exit).
  void finish_trace(bool bounded = false);
  // CUPTI's forced flush on a thread of its own, waited for until
  // kEndCuptiMarginNs before the caller's kExitFinishNs run out, and for at
  // most kEndCuptiBudgetNs: at the process's end it may wait for GPU work in
  // flight, or for a driver lock that the interrupted thread holds (an end
  // signal's handler that ran inside a CUDA call). False when it had not
  // returned: the trace then ends without the records it held, and nothing
  // enters CUPTI again (an exec that fails leaves the process running).
  bool stop_cupti_bounded();
  static constexpr uint64_t kEndCuptiBudgetNs = 1'200'000'000;
  static constexpr uint64_t kEndCuptiMarginNs = 600'000'000;  // the notes, the last events, the End
  // The forced flush of stop_cupti_bounded: 0 not started, 1 running, 2 returned.
  std::atomic<int> end_flush_{0};
  // When an _exit, exec or end signal asked for the finish (the caller's clock starts).
  std::atomic<uint64_t> end_requested_ns_{0};

  std::atomic<void (*)()> before_shutdown_{nullptr};
  std::atomic<void (*)()> in_fork_child_{nullptr};
  std::atomic<void (*)()> before_fork_{nullptr};
  std::atomic<void (*)()> at_start_{nullptr};
  // The recorder's state, capture flag and the governor's word live on the
  // hot line (core/hot_line.h): g_hot_line.recorder_state, .capturing, .copy_records_on.
  std::atomic<int> driver_state_{0};
  std::atomic<bool> um_requested_{false};  // 0 not attached, 1 attaching, 2 attached
  CorrelationIds correlation_;
  bool capture_range_ = false;  // CUXFER_CAPTURE_RANGE given (set once, in the constructor)
  RankedMutex capture_mutex_{LockRank::kRecorderCapture};    // guards capture_ (a start or stop, rare)
  CaptureRanges capture_;
  RingRegistry rings_;
  CallSiteTable callsites_;

  // Writer side, guarded by session_mutex_.
  RankedMutex session_mutex_{LockRank::kRecorderSession};
  std::unique_ptr<trace::TraceWriter> writer_;
  std::string trace_path_;
  ModuleTracker modules_;
  std::vector<std::string> notes_;
  std::vector<trace::Event> scratch_events_;
  event_clock::StampConverter stamps_;  // the events' stamps to CLOCK_MONOTONIC (core/event_clock.h)
  std::vector<trace::GpuRecord> scratch_gpu_;
  uint64_t events_recorded_ = 0, events_dropped_ = 0, gpu_recorded_ = 0, gpu_dropped_ = 0;
  bool simulated_ = false;
  int cupti_state_ = 0;
  std::string cupti_reason_;
  trace::CuptiHandover handover_;
  bool handover_pending_ = false;  // handover_ not yet written
  // The CUPTI governor (CUXFER_CUPTI=auto): the copies of the current window,
  // its state, and the changes not yet written (CuptiGate block).
  std::atomic<bool> governed_{false};  // also read by the writer's tick, outside the lock
  GovernorState governor_;
  // CUPTI detached while the records were off, and attached again (writer thread).
  uint32_t cupti_detaches_ = 0, cupti_attaches_ = 0;
  uint64_t cupti_detach_ns_ = 0, cupti_attach_ns_ = 0;
  std::string cupti_detach_summary() const;
  std::string hook_time_summary();
  HookSums hook_sums();
  std::string nvtx_summary() const;
  uint64_t window_start_ns_ = 0;
  // Call sites some copy with the records on has timed, and the window's
  // copies: how many of each kind, and counted against those sites
  // (CopyWindow::new_sites, timed_calls).
  TimedSites timed_sites_;
  CopyWindow window_;
  void count_window_copy(const trace::Event& e);
  HookSums window_hook_sums_;  // the rings' hook-time sums when the window began
  uint64_t start_ns_ = 0;  // when this trace began (hook_time_summary)
  std::vector<trace::CuptiGateChange> gate_changes_;
  uint64_t last_status_ns_ = 0;

  RankedMutex wake_mutex_{LockRank::kRecorderWake};
  std::condition_variable wake_;
  bool stop_ = false;
  QuietThread writer_thread_;
  // finish_before_exit(): the process that opened the trace (a vfork child
  // reads its parent's), the exit status asked for, and the writer's answer.
  std::atomic<int> pid_{0};
  std::atomic<int> exit_status_{0};
  char exec_path_[kExecPathMax + 1] = {};  // finish_before_exec()'s path, before exit_requested_ (release)
  // How the process ends, for the trace's note (before exit_requested_, release).
  enum class EndKind : int { Exit, Exec, Signal };
  EndKind end_kind_ = EndKind::Exit;
  // The three ends: claims the trace's end and waits for the writer to finish
  // it. `value`: the exit status or the signal.
  bool finish_before_end(EndKind kind, int value, const char* exec_path) noexcept;
  std::atomic<bool> exit_requested_{false};
  std::atomic<bool> exit_finished_{false};
  // Where the writer's finish is (a string literal), for the line a caller
  // that waited too long prints: which step did not return.
  std::atomic<const char*> finish_phase_{nullptr};
};

}  // namespace cuxfer::shim
