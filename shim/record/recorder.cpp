#include "record/recorder.h"
#include "core/export.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <link.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <cuxfer/build_info.h>

#include "core/allocation.h"
#include "core/bounded_lock.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/rank.h"
#include "symbols/symbol_table.h"
#include "memory/pointer_classifier.h"
#include "python/python_stack.h"
#include "record/cupti_collector.h"
#include "record/cupti_warmup.h"
#include "record/cupti_locate.h"
#include "record/hook_time.h"
#include "record/nvtx_ranges.h"
#include "memory/host_ranges.h"
#include "trace/format.h"
#include "trace/shim_names.h"

#ifndef CUXFER_VERSION
#define CUXFER_VERSION "0.0.0"
#endif

namespace cuxfer::shim {
namespace {

// constinit: no per-access guard (the file's t_releaser has a destructor, so
// its thread-locals share a lazily run init function the compiler checks).
constinit thread_local ThreadState t_state __attribute__((tls_model("initial-exec")));

// Hands the ring back when its thread exits; the writer drains and recycles it.
struct RingReleaser {
  EventRing* ring = nullptr;
  ~RingReleaser() {
    if (ring) ring->state.store(EventRing::kOrphaned, std::memory_order_release);
  }
};
thread_local RingReleaser t_releaser;

constexpr size_t kEventsPerBlock = 65536;
constexpr uint64_t kStatusPeriodNs = 1000000000ull;

std::string basename_of(const std::string& p) {
  auto slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string read_link(const char* path) {
  char buf[PATH_MAX];
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// With read(2), not a stream: libstdc++'s streams allocate inside libstdc++,
// past the shim's own operator new (core/allocation.h).
std::vector<std::string> read_cmdline() {
  std::vector<std::string> argv;
  int fd = ::open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return argv;
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR);)
    if (n > 0) all.append(buf, static_cast<size_t>(n));
  ::close(fd);
  for (size_t start = 0; start < all.size();) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    argv.emplace_back(all, start, end - start);
    start = end + 1;
  }
  return argv;
}

// A name safe to put in a file name.
std::string sanitize(std::string s) {
  for (char& c : s)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) c = '_';
  return s.empty() ? std::string("app") : s;
}

void append_manifest(const std::string& manifest, const std::string& trace_path) {
  if (manifest.empty()) return;
  int fd = ::open(manifest.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  std::string line = std::to_string(getpid()) + " " + trace_path + "\n";
  // One short O_APPEND write: lines of concurrent processes never interleave.
  ssize_t ignored = ::write(fd, line.data(), line.size());
  (void)ignored;
  ::close(fd);
}

// mkdir -p: every missing component of `dir`, with the mode the umask
// leaves of 0777, as `mkdir -p` and `cuxfer record -o` make them. Another
// process (a rank) creating one at the same time is not a failure.
bool make_directories(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/') continue;
    const std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) return false;
  }
  return true;
}

void on_exit_handler() { Recorder::instance().shutdown(); }
void on_fork_prepare() { Recorder::instance().prepare_fork(); }
void on_fork_parent() { Recorder::instance().after_fork_parent(); }
void on_fork_child() { Recorder::instance().after_fork_child(); }

}  // namespace

CUXFER_HOT ThreadState& thread_state() {
  ThreadState& t = t_state;
  if (t.tid == 0) t.tid = static_cast<uint32_t>(gettid());
  return t;
}

Recorder& Recorder::make_instance() {
  static Recorder* r = [] {
    auto* made = new Recorder;  // never destroyed: hooks may run during static destruction
    g_hot_line.recorder.store(made, std::memory_order_release);
    return made;
  }();
  return *r;
}

Recorder::Recorder() : rings_(config().buffer_events) {
  capture_range_ = config().capture_range == CaptureRange::ProfilerApi;
  g_hot_line.capturing.store(!capture_range_, std::memory_order_relaxed);
  // Made now, not at their first use: the fork handlers lock them, and making
  // one there would allocate with the libc hooks' lock held (a deadlock).
  NvtxRanges::instance();
  allocation_table();
  pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
}

void Recorder::profiler_call(bool start) {
  if (!capture_range_) return;
  const uint64_t t = now_ns();
  bool changed;
  {
    std::lock_guard<RankedMutex> lock(capture_mutex_);
    changed = start ? capture_.start(t) : capture_.stop(t);
    if (changed) g_hot_line.capturing.store(start, std::memory_order_relaxed);
  }
  if (changed) log::debug(start ? "capture range: recording" : "capture range: paused");
}

bool Recorder::attach_ring(ThreadState& ts) {
  ts.ring = rings_.acquire();
  t_releaser.ring = ts.ring;
  return ts.ring != nullptr;
}

void Recorder::note(const std::string& msg, bool warning) {
  warning ? log::warn(msg) : log::info(msg);
  std::lock_guard<RankedMutex> lock(session_mutex_);
  notes_.push_back(msg);
}

void Recorder::before_dlclose() {
  if (!recording() || thread_state().internal) return;
  std::lock_guard<RankedMutex> lock(session_mutex_);
  if (!writer_ || writer_->failed() || allocation::exhausted()) return;
  const auto modules = modules_.poll();
  if (modules.empty()) return;
  std::string payload;
  trace::encode(modules, payload);
  writer_->write_block(trace::BlockType::Modules, payload);
}

void Recorder::cupti_handed_over(const std::string& reason) {
  const uint64_t t = now_ns();
  log::warn("the application's profiler took CUPTI over (" + reason +
            "); cuxfer handed its buffers back and records CPU times only from here");
  std::lock_guard<RankedMutex> lock(session_mutex_);
  handover_ = {t, reason};
  handover_pending_ = true;
  cupti_reason_ = "handed to the application's profiler (" + reason + ")";
}

bool Recorder::start_slow() {
  int expected = kIdle;
  if (!g_hot_line.recorder_state.compare_exchange_strong(expected, kStarting, std::memory_order_acq_rel)) {
    // Another thread is opening the trace (a file create and a thread start,
    // nothing that can call back into a hook): wait, so that no call of this
    // thread goes unrecorded.
    while ((expected = g_hot_line.recorder_state.load(std::memory_order_acquire)) == kStarting) sched_yield();
    return expected == kRecording;
  }
  InternalScope internal;
  const Config& c = config();
  for (const auto& p : c.problems) log::warn(p);
  if (!c.enabled) {
    g_hot_line.recorder_state.store(kOff, std::memory_order_release);
    return false;
  }
  publish_hot_config(c);
  // The events' stamps (ticks or nanoseconds) are chosen before any hook
  // records, with the converter's first pair (core/event_clock.h).
  log::debug(event_clock::init(c.tsc_stamps));
  {
    std::lock_guard<RankedMutex> lock(session_mutex_);
    stamps_.set_ticks(g_hot_line.tsc_stamps);
    stamps_.add(event_clock::read_pair());
  }
  std::string unwinder = c.stack_depth ? init_stack_capture() : std::string();
  {
    std::lock_guard<RankedMutex> lock(session_mutex_);
    for (const auto& p : c.problems) notes_.push_back(p);
    if (c.rewrite_pin)
      notes_.push_back("rewrite: pin: enabled; 1D copies of pageable memory are staged from " +
                       std::to_string(c.stage_min_h2d) + " bytes (H2D) and " + std::to_string(c.stage_min_d2h) +
                       " bytes (D2H); reused buffers " +
                       (c.register_in_place ? "from " + std::to_string(c.register_min) + " bytes are registered in place"
                                            : std::string("are not registered (CUXFER_REGISTER=off)")) +
                       "; at most " + std::to_string(pinned_budget_bytes(c)) + " bytes of pinned memory");
    if (unwinder.find("glibc") != std::string::npos) notes_.push_back("call stacks: " + unwinder);
    if (!open_trace()) {
      g_hot_line.recorder_state.store(kOff, std::memory_order_release);
      return false;
    }
  }
  static bool exit_registered = false;
  if (!exit_registered) {
    exit_registered = true;
    std::atexit(on_exit_handler);
  }
  stop_ = false;
  pid_.store(static_cast<int>(getpid()), std::memory_order_relaxed);
  // The writer runs with every signal blocked (the app's handlers stay on
  // the app's threads). No thread (out of threads, out of memory): nothing
  // is recorded and every call passes through, said once.
  if (!writer_thread_.start([this] { writer_loop(); })) {
    // The trace keeps one note saying so (and its End), not a silent gap.
    note("cannot start the trace writer's thread: this process is not recorded from here (its CUDA calls run "
         "as they would without cuxfer)");
    write_cycle(true);
    std::lock_guard<RankedMutex> lock(session_mutex_);
    writer_.reset();
    g_hot_line.recorder_state.store(kOff, std::memory_order_release);
    return false;
  }
  // Memory ran out while starting: the trace is open and the writer runs, so
  // the trace ends with its note; nothing more is recorded.
  if (allocation::exhausted()) {
    g_hot_line.recorder_state.store(kStopped, std::memory_order_release);
    return false;
  }
  g_hot_line.recorder_state.store(kRecording, std::memory_order_release);
  if (auto at_start = at_start_.load(std::memory_order_acquire)) at_start();
  return true;
}

void Recorder::stop_for_memory() {
  int expected = kRecording;
  g_hot_line.recorder_state.compare_exchange_strong(expected, kStopped, std::memory_order_acq_rel);
  // The writer sees allocation::exhausted() at its next tick and stops
  // cycling; shutdown writes the note and the End.
}

namespace {

// Where to look for libcupti (record/cupti_locate.h): the configuration and
// the objects loaded now, when the driver is first reached (the runtime the
// app uses is loaded by then).
CuptiSearch cupti_search(const Config& c) {
  CuptiSearch s;
  s.override_path = c.cupti_library;
  s.search_path = c.cupti_search_path;
  s.toolkit_roots = {c.cuda_home, c.cuda_path, "/usr/local/cuda"};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (!info->dlpi_name || info->dlpi_name[0] != '/') return 0;
        // Resolved: PyTorch's RUNPATH loads torch/lib/../../nvidia/cu13/lib/...,
        // and the report should name the folder the user can find.
        char real[PATH_MAX];
        const char* name = ::realpath(info->dlpi_name, real) ? real : info->dlpi_name;
        static_cast<std::vector<std::string>*>(out)->emplace_back(name);
        return 0;
      },
      &s.loaded);
  return s;
}

}  // namespace

bool Recorder::attach_driver_slow() {
  int expected = 0;
  if (!driver_state_.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) return false;
  InternalScope internal;
  // Only now is libcuda known to be loaded: a runtime hook can open the
  // session before cudart has loaded the driver.
  void* cuda = libcuda_handle();
  if (!cuda) {
    driver_state_.store(0, std::memory_order_release);  // try again at the next driver call
    return false;
  }
  const Config& c = config();
  bool simulated = real_dlsym(cuda, "simcuda_is_simulated") != nullptr;
  auto& collector = CuptiCollector::instance();
  std::string reason;
  if (simulated && c.cupti_library.empty()) {
    // An explicit CUXFER_CUPTI_LIB is still tried: the tests' stand-in CUPTI.
    reason = "simulated CUDA (tests/simcuda): there is no GPU and no CUPTI";
  } else if (cupti_forbidden_) {
    reason = "forked from a process that used CUPTI; CUPTI state does not survive fork";
  } else if (c.cupti == CuptiMode::Off) {
    reason = "disabled by CUXFER_CUPTI=off";
  } else if (collector.start(cupti_candidates(cupti_search(c)), reason) && !reason.empty()) {
    log::info(reason);
  }
  {
    std::lock_guard<RankedMutex> lock(session_mutex_);
    simulated_ = simulated;
    cupti_state_ = collector.active() ? 1 : 2;
    cupti_reason_ = reason;
    // Kernel records are asked for overlap, which wants every copy's GPU time.
    governed_.store(collector.active() && c.cupti == CuptiMode::Auto && !c.cupti_kernels, std::memory_order_relaxed);
    window_start_ns_ = now_ns();
    window_ = CopyWindow{};
    timed_sites_.clear();
    window_hook_sums_ = hook_sums();
    // The analyzer's overlap analysis needs to know kernels were recorded at all.
    if (collector.active() && c.cupti_kernels && reason.rfind("kernel records unavailable", 0) != 0)
      notes_.push_back("cupti: kernel records on");
    if (collector.active())
      notes_.push_back("cupti: " + collector.library() + " (" + collector.library_why() + ")");
    if (!collector.active()) {
      notes_.push_back("CUPTI unavailable: " + reason + "; GPU times are not recorded");
      if (!simulated) log::info("CUPTI unavailable: " + reason + "; CPU timing only");
    }
  }
  driver_state_.store(2, std::memory_order_release);
  return true;
}

void Recorder::enable_unified_memory_records() {
  if (!config().cupti_unified_memory) return;
  ensure_driver_attached();
  auto& collector = CuptiCollector::instance();
  if (!collector.active()) return;  // the CUPTI note already says why
  InternalScope internal;
  std::string reason;
  const bool on = collector.enable_unified_memory(reason);
  std::lock_guard<RankedMutex> lock(session_mutex_);
  // The managed-memory analysis needs to know whether no records means no migrations.
  notes_.push_back(on ? "cupti: unified memory records on" : "cupti: unified memory records unavailable: " + reason);
  if (!on) log::info("unified memory records unavailable: " + reason);
}

bool Recorder::open_trace() {
  const Config& c = config();
  std::string exe = read_link("/proc/self/exe");
  std::string name = sanitize(c.trace_name.empty() ? basename_of(exe) : c.trace_name);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  const RankResult rank = rank_from_environment(environ, host);  // core/rank.h: mpirun, srun, torchrun
  std::string base = c.output_dir + "/cuxfer-" + name + rank_file_tag(rank.rank) + "-" + std::to_string(getpid());
  std::string error;
  for (int attempt = 0; attempt < 100 && !writer_; ++attempt) {
    trace_path_ = base;
    if (attempt) {  // pid reuse across runs
      trace_path_ += '-';
      trace_path_ += std::to_string(attempt);
    }
    trace_path_ += ".trace";
    writer_ = trace::TraceWriter::create(trace_path_, 0600, &error);
    // CUXFER_OUTPUT_DIR names a folder that does not exist yet (the shim
    // preloaded by hand or by a job launcher): make it, as `record -o` does.
    if (!writer_ && errno == ENOENT && attempt == 0 && make_directories(c.output_dir)) {
      log::info("created CUXFER_OUTPUT_DIR " + c.output_dir);
      writer_ = trace::TraceWriter::create(trace_path_, 0600, &error);
    }
    if (!writer_ && errno != EEXIST) break;
  }
  if (!writer_) {
    // Every hook passes through from here, the rewrite's too: say so where it was asked for.
    log::error(error + "; this process is not recorded" +
               (c.rewrite_any() ? std::string(" and its copies are not rewritten") : std::string()) +
               " (set CUXFER_OUTPUT_DIR)");
    return false;
  }
  trace::ProcessInfo p;
  p.pid = static_cast<uint32_t>(getpid());
  p.ppid = static_cast<uint32_t>(getppid());
  p.start_realtime_ns = realtime_ns();
  p.start_monotonic_ns = now_ns();
  start_ns_ = p.start_monotonic_ns;
  p.exe = exe;
  p.argv = read_cmdline();
  p.hostname = host;
  p.trace_name = name;
  p.cuxfer_version = CUXFER_BUILD_ID;
  p.stack_depth = g_hot_line.stack_depth;
  std::string payload;
  trace::encode(p, payload);
  writer_->write_block(trace::BlockType::Process, payload);
  std::vector<std::string> api_names;
  for (size_t i = 0; i < kHookCount; ++i) api_names.emplace_back(hook_entry(static_cast<HookId>(i)).name);
  api_names.emplace_back(trace::kStagingPoolApiName);
  api_names.emplace_back(trace::kRegisterApiName);
  api_names.emplace_back(trace::kFingerprintApiName);
  api_names.emplace_back(trace::kNvtxApiName);
  payload.clear();
  trace::encode_strings(api_names, payload);
  writer_->write_block(trace::BlockType::ApiNames, payload);
  trace::RunModes modes;
  modes.rewrite_pin = c.rewrite_pin;
  modes.policy = !c.policy_path.empty();
  modes.register_in_place = c.rewrite_any() && c.register_in_place;
  modes.python_stacks = c.python_stacks && g_hot_line.stack_depth > 0;
  modes.policy_path = c.policy_path;
  payload.clear();
  trace::encode(modes, payload);
  writer_->write_block(trace::BlockType::RunModes, payload);
  if (!rank.problem.empty()) {
    log::warn(rank.problem);
    notes_.push_back(rank.problem);
  }
  if (rank.rank) notes_.push_back(rank_note(rank.rank));  // the analyzer's rank (docs/trace-format.md)
  if (!c.run_id.empty()) notes_.push_back("run: " + c.run_id);  // which record run (docs/trace-format.md)
  append_manifest(c.manifest, trace_path_);
  if (!c.launched) log::info("recording to " + trace_path_);
  events_recorded_ = events_dropped_ = gpu_recorded_ = gpu_dropped_ = 0;
  last_status_ns_ = 0;
  return true;
}

namespace {
// The shortest window the governor judges a copy storm on (the writer's tick).
constexpr uint64_t kGovernorMinWindowNs = 5'000'000;
}  // namespace

void Recorder::writer_loop() {
  InternalScope internal;  // CUPTI flushes from here must not be recorded
  python::PythonStacks::instance().read_program();  // a file read, off the app's threads
  const uint64_t period_ns = uint64_t{config().flush_ms} * 1000000ull;
  // Rings are also looked at every tick: one that is a quarter full is
  // drained at once, so a thread issuing copies faster than a ring holds per
  // flush period loses nothing (65536 events per 5 ms: ~13 M calls/s/thread).
  const auto tick = std::chrono::milliseconds(std::min<uint32_t>(5, config().flush_ms));
  const size_t early = config().buffer_events / 4;
  const uint64_t cupti_flush_ns = uint64_t{config().cupti_flush_ms} * 1000000ull;
  uint64_t last_cupti_flush = now_ns(), last_cycle = now_ns();
  for (;;) {
    {
      // An _exit is not signalled through wake_ (notifying is not
      // async-signal-safe): the tick sees it.
      RankedUniqueLock lock(wake_mutex_);
      if (wake_.wait_for(lock.get(), tick, [this] { return stop_ || exit_requested_.load(std::memory_order_acquire); })) {
        if (stop_) return;
        lock.unlock();
        return finish_for_exit();
      }
    }
    if (allocation::exhausted()) continue;  // out of memory: nothing more to write until the end
    uint64_t t = now_ns();
    bool due = t - last_cycle >= period_ns;
    size_t queued = 0;
    if (!due) rings_.for_each([&](EventRing& r) {
      const size_t n = r.size();
      queued += n;
      due = due || n >= early;
    });
    // A copy storm with CUPTI's records on: the governor should not wait for
    // the period to see it (a 4-byte storm pays ~58 % while they are on).
    // What the rings hold is what arrived since the last cycle.
    if (!due && queued > 0 && governed_.load(std::memory_order_relaxed) &&
        g_hot_line.copy_records_on.load(std::memory_order_relaxed) && t - last_cycle >= kGovernorMinWindowNs)
      due = static_cast<double>(queued) * GovernorSettings{}.record_cost_ns >
            GovernorSettings{}.max_share * static_cast<double>(t - last_cycle);
    if (!due) continue;
    if (cupti_flush_ns && t - last_cupti_flush > cupti_flush_ns) {
      // Completed CUPTI buffers are otherwise delivered only when full.
      CuptiCollector::instance().flush(false);
      last_cupti_flush = t;
    }
    write_cycle(false);
    last_cycle = now_ns();
  }
}

void Recorder::finish_for_exit() {
  finish_phase_.store("the rewrite's last notes", std::memory_order_release);
  if (auto before = before_shutdown_.load(std::memory_order_acquire)) before();
  const int value = exit_status_.load(std::memory_order_relaxed);
  std::string how;
  switch (end_kind_) {
    case EndKind::Exit: how = "ended through _exit(" + std::to_string(value) + ")"; break;
    case EndKind::Exec: how = std::string("replaced its image through execve (") + exec_path_ + ")"; break;
    case EndKind::Signal: {
      const char* abbrev = sigabbrev_np(value);
      how = "was ended by SIG" + std::string(abbrev ? abbrev : "?") + " (signal " + std::to_string(value) +
            ", its default action)";
      break;
    }
  }
  note("the process " + how + ", which runs no exit handler: the trace writer finished the trace before it",
       /*warning=*/false);
  finish_trace(/*bounded=*/true);
  // The caller of _exit does not join this thread (nor does shutdown(): the
  // state is off), and a thread neither joined nor detached is a leak to
  // ThreadSanitizer's exit check.
  QuietThread::detach_self();
  exit_finished_.store(true, std::memory_order_release);
}

void Recorder::write_cycle(bool final) {
  std::lock_guard<RankedMutex> lock(session_mutex_);
  if (!writer_ || writer_->failed()) return;
  std::string payload;
  // Out of memory: only the notes, the status and the End are written (each
  // a few hundred bytes from the reserve); what the rings still hold is
  // counted as dropped, not drained into memory the process does not have.
  if (allocation::exhausted()) {
    rings_.for_each([&](EventRing& r) { events_dropped_ += r.size(); });
    write_tail(final, payload);
    return;
  }
  // The events first, then what they name: a thread interns its site (and
  // the site's code objects and modules) before it pushes the event, so
  // every site an event drained here names is collected below, also in the
  // last cycle, which has no next one to bring it.
  scratch_events_.clear();
  rings_.for_each([&](EventRing& r) {
    int state = r.state.load(std::memory_order_acquire);
    if (state == EventRing::kFree) return;
    r.drain(scratch_events_);
    events_dropped_ += r.take_dropped();
    if (state == EventRing::kOrphaned) {  // its thread is gone and it is empty now
      r.reset();
      r.state.store(EventRing::kFree, std::memory_order_release);
    }
  });
  auto modules = modules_.poll();
  if (!modules.empty()) {
    trace::encode(modules, payload);
    writer_->write_block(trace::BlockType::Modules, payload);
  }
  // Code objects before the sites: a site's Python frames were interned
  // before the site itself, so every code a collected site names is here.
  std::vector<trace::PyCode> codes;
  python::PythonStacks::instance().collect_new(codes);
  if (!codes.empty()) {
    payload.clear();
    trace::encode(codes, payload);
    writer_->write_block(trace::BlockType::PyCodes, payload);
  }
  for (std::string line; python::PythonStacks::instance().take_note(line);) {
    log::info(line);
    notes_.push_back(std::move(line));
  }
  std::vector<trace::CallSite> sites;
  callsites_.collect_new(sites);
  if (!sites.empty()) {
    payload.clear();
    trace::encode(sites, payload);
    writer_->write_block(trace::BlockType::CallSites, payload);
  }
  if (NvtxRanges::instance().used()) {
    std::vector<trace::NvtxName> names;
    std::vector<trace::CallSite> stacks;
    NvtxRanges::instance().collect_new(names, stacks);
    if (!names.empty()) {
      payload.clear();
      trace::encode(names, payload);
      writer_->write_block(trace::BlockType::NvtxNames, payload);
    }
    if (!stacks.empty()) {
      payload.clear();
      trace::encode(stacks, payload);
      writer_->write_block(trace::BlockType::NvtxStacks, payload);
    }
  }
  if (stamps_.ticks() && !scratch_events_.empty()) {
    // Every stamp drained was read before this pair: none is past it.
    stamps_.add(event_clock::read_pair());
    for (trace::Event& e : scratch_events_) {
      e.t_enter_ns = stamps_.to_ns(e.t_enter_ns);
      e.t_exit_ns = stamps_.to_ns(e.t_exit_ns);
    }
  }
  for (size_t i = 0; i < scratch_events_.size(); i += kEventsPerBlock) {
    size_t n = std::min(kEventsPerBlock, scratch_events_.size() - i);
    writer_->write_block(trace::BlockType::Events, scratch_events_.data() + i, n * sizeof(trace::Event));
  }
  events_recorded_ += scratch_events_.size();
  if (governed_.load(std::memory_order_relaxed) && !final) {
    for (const trace::Event& e : scratch_events_) {
      const auto kind = static_cast<trace::EventKind>(e.kind);
      if (kind == trace::EventKind::Copy || kind == trace::EventKind::Memset) count_window_copy(e);
    }
    govern_cupti(now_ns());
  }
  if (!gate_changes_.empty()) {
    payload.clear();
    trace::encode(gate_changes_, payload);
    writer_->write_block(trace::BlockType::CuptiGate, payload);
    gate_changes_.clear();
  }
  scratch_gpu_.clear();
  CuptiCollector::instance().take(scratch_gpu_, gpu_dropped_);
  for (size_t i = 0; i < scratch_gpu_.size(); i += kEventsPerBlock) {
    size_t n = std::min(kEventsPerBlock, scratch_gpu_.size() - i);
    writer_->write_block(trace::BlockType::GpuRecords, scratch_gpu_.data() + i,
                         n * sizeof(trace::GpuRecord));
  }
  gpu_recorded_ += scratch_gpu_.size();
  if (handover_pending_) {
    payload.clear();
    trace::encode(handover_, payload);
    writer_->write_block(trace::BlockType::CuptiHandover, payload);
    handover_pending_ = false;
  }
  write_tail(final, payload);
}

// The notes, the status now and then, and at the end the End: session_mutex_ held.
void Recorder::write_tail(bool final, std::string& payload) {
  if (!notes_.empty()) {
    payload.clear();
    trace::encode_strings(notes_, payload);
    writer_->write_block(trace::BlockType::Notes, payload);
    notes_.clear();
  }
  uint64_t t = now_ns();
  if (final || t - last_status_ns_ >= kStatusPeriodNs) {
    trace::Status s;
    s.simulated = simulated_;
    s.cupti = cupti_state_ == 1 ? trace::CuptiState::Active
              : cupti_state_ == 2 ? trace::CuptiState::Unavailable
                                  : trace::CuptiState::Unknown;
    s.cupti_reason = cupti_reason_;
    s.events_recorded = events_recorded_;
    s.events_dropped = events_dropped_;
    s.gpu_records_recorded = gpu_recorded_;
    s.gpu_records_dropped = gpu_dropped_;
    s.callsites_dropped = callsites_.dropped();
    payload.clear();
    trace::encode(s, payload);
    writer_->write_block(trace::BlockType::Status, payload);
    last_status_ns_ = t;
  }
  if (final) writer_->write_block(trace::BlockType::End, nullptr, 0);
  if (writer_->failed()) {
    static std::atomic<bool> warned{false};
    log::warn_once(warned, writer_->error() + "; recording stops here");
  }
}

void Recorder::emit_nvtx_ranges(ThreadState& ts, const trace::Event& next) {
  ts.nvtx_changed = false;
  trace::Event r{};
  r.t_enter_ns = r.t_exit_ns = next.t_enter_ns;
  r.thread_id = ts.tid;
  r.callsite_id = NvtxRanges::instance().stack_id(ts);
  r.bytes = ts.nvtx_depth;
  r.api = kNvtxApi;
  r.kind = static_cast<uint8_t>(trace::EventKind::NvtxRanges);
  r.device = -1;
  ts.ring->push(r);
}

void Recorder::count_window_copy(const trace::Event& e) {
  ++((e.flags & trace::kFlagAsync) ? window_.async_calls : window_.sync_calls);
  const uint64_t site = uint64_t{e.callsite_id} << 24 | uint64_t{e.api} << 8 | e.kind;
  timed_sites_.count(site, (e.flags & trace::kFlagGpuExpected) != 0, window_);
}

void Recorder::govern_cupti(uint64_t now) {
  // The shim's own work in the window: the records get what it leaves of the share.
  const HookSums sums = hook_sums();
  CopyWindow w = window_;  // the copies' counts; the rest is the window's own
  w.ns = now - window_start_ns_;
  w.shim_ns = estimate_hook_ns(sums, window_hook_sums_);
  w.paused = capture_range_ && !capturing();
  window_hook_sums_ = sums;
  window_start_ns_ = now;
  window_ = CopyWindow{};
  GovernorSettings settings;
  if (!config().cupti_detach) settings.async_detach_after = 0;
  const GovernorStep st = govern(governor_, w, settings);
  auto& collector = CuptiCollector::instance();
  if (!st.changed) {
    governor_ = st.next;
    if (st.may_detach && !collector.detached() && config().cupti_detach) {
      const uint64_t t0 = now_ns();
      if (collector.detach()) {
        ++cupti_detaches_;
        cupti_detach_ns_ += now_ns() - t0;
      }
    }
    return;
  }
  if (!collector.active()) {  // handed over to the app's profiler, or stopped: nothing to govern
    governed_.store(false, std::memory_order_relaxed);
    return;
  }
  // Off: the hooks stop expecting records before CUPTI stops making them;
  // on: CUPTI makes them before the hooks expect them. The change's time is
  // on the safe side of each (trace/records.h): an off change's time is read
  // before the hooks' flag is cleared, so every call that saw the flag
  // cleared entered after it (read after, a writer preempted in between left
  // such calls looking "on throughout" to the analyzer, neither timed nor off);
  // an on change's time is read when the enable returned, and the analyzer
  // joins the records of calls that raced it (analyzer/model/job.cpp).
  bool ok;
  uint64_t t;
  if (!st.next.on) {
    t = now_ns();
    g_hot_line.copy_records_on.store(false, std::memory_order_release);
    ok = collector.set_copy_records(false);
  } else {
    const bool was_detached = collector.detached();
    const uint64_t t0 = now_ns();
    ok = collector.set_copy_records(true);
    t = now_ns();
    if (ok && was_detached) {
      ++cupti_attaches_;
      cupti_attach_ns_ += t - t0;
    }
    if (ok) g_hot_line.copy_records_on.store(true, std::memory_order_release);
  }
  if (!ok) {
    governed_.store(false, std::memory_order_relaxed);
    // The app's profiler took CUPTI meanwhile (hand_over): nothing is ours to govern, nothing to say.
    if (!collector.active()) return;
    // CUPTI refused: leave the records as they are for the rest of the run.
    if (!st.next.on) g_hot_line.copy_records_on.store(true, std::memory_order_release);
    std::string msg = std::string("cupti: could not turn copy records ") + (st.next.on ? "on" : "off") +
                      "; they stay " + (st.next.on ? "off" : "on") + " from here";
    log::warn(msg);
    notes_.push_back(std::move(msg));
    if (st.next.on) gate_changes_.push_back({t, false, trace::GateReason::Stop});
    return;
  }
  governor_ = st.next;
  gate_changes_.push_back({t, st.next.on, st.next.reason});
}

// What the analyzer must know about the NVTX ranges it will replay: pops
// without a push were ignored, and stacks deeper than the shim keeps are cut.
std::string Recorder::nvtx_summary() const {
  const NvtxRanges& n = NvtxRanges::instance();
  std::string line;
  if (n.unbalanced_pops() > 0)
    line += std::to_string(n.unbalanced_pops()) + " NVTX range pops without an open range were ignored";
  if (n.deepest() > ThreadState::kNvtxMaxDepth)
    line += std::string(line.empty() ? "" : "; ") + "NVTX ranges nested " + std::to_string(n.deepest()) +
            " deep: copies are attributed to the outermost " + std::to_string(ThreadState::kNvtxMaxDepth);
  return line.empty() ? line : "nvtx: " + line;
}

std::string Recorder::cupti_detach_summary() const {
  auto ms = [](uint64_t ns) { return std::to_string(ns / 1000000) + "." + std::to_string(ns / 100000 % 10) + " ms"; };
  return "cupti: detached " + std::to_string(cupti_detaches_) + " times while its copy records were off (" +
         ms(cupti_detach_ns_) + "), attached again " + std::to_string(cupti_attaches_) + " times (" +
         ms(cupti_attach_ns_) + "), on the writer thread";
}

// Every ring's hook-time sums together (the governor's windows).
HookSums Recorder::hook_sums() {
  HookSums sums;
  rings_.for_each([&](EventRing& r) { sums += HookSums::of(r); });
  return sums;
}

// What the shim's own work in the hooks cost (record/hook_time.h).
std::string Recorder::hook_time_summary() {
  HookTime t;
  rings_.for_each([&](EventRing& r) { t.add(r); });
  const uint64_t now = now_ns();
  if (!capture_range_) return hook_time_note(t, now - start_ns_);
  // Only calls inside the ranges are counted (and timed): their share is of
  // the ranges' time, not of the whole run's.
  uint64_t inside;
  {
    std::lock_guard<RankedMutex> lock(capture_mutex_);
    inside = capture_.captured_ns(now);
  }
  return hook_time_note(t, inside, true);
}

bool Recorder::claim_end() {
  int expected = kRecording;
  if (g_hot_line.recorder_state.compare_exchange_strong(expected, kOff, std::memory_order_acq_rel)) return true;
  expected = kStopped;
  return g_hot_line.recorder_state.compare_exchange_strong(expected, kOff, std::memory_order_acq_rel);
}

void Recorder::shutdown() {
  if (!claim_end()) {
    // An exec failed after its finish gave up on CUPTI's last flush: the
    // exit waits for it (10 s at most, never for ever), as an exit would
    // have, before CUPTI tears down under it.
    const uint64_t until = now_ns() + 10'000'000'000ull;
    while (end_flush_.load(std::memory_order_acquire) == 1 && now_ns() < until) {
      timespec pause{0, 1'000'000};
      nanosleep(&pause, nullptr);
    }
    return;
  }
  InternalScope internal;
  if (auto before = before_shutdown_.load(std::memory_order_acquire)) before();
  {
    std::lock_guard<RankedMutex> lock(wake_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  writer_thread_.join();
  finish_trace();
}

bool Recorder::stop_cupti_bounded() {
  CuptiCollector& collector = CuptiCollector::instance();
  if (!collector.active()) return true;
  if (collector.detached()) {  // no CUPTI call to wait for
    collector.stop();
    return true;
  }
  end_flush_.store(1, std::memory_order_release);
  if (!spawn_quiet_thread([this] {
        InternalScope internal;  // the rewrite's hooks must not see CUPTI's own calls
        CuptiCollector::instance().stop();
        end_flush_.store(2, std::memory_order_release);
      })) {
    collector.stop();  // no thread to spare: waited for here, as at an exit
    end_flush_.store(2, std::memory_order_release);
    return true;
  }
  const uint64_t requested = end_requested_ns_.load(std::memory_order_acquire);
  const uint64_t now = now_ns();
  uint64_t deadline = now + kEndCuptiBudgetNs;
  if (requested) deadline = std::min(deadline, requested + kExitFinishNs - std::min(kExitFinishNs, kEndCuptiMarginNs));
  while (end_flush_.load(std::memory_order_acquire) != 2) {
    if (now_ns() >= deadline) {
      // Nothing enters CUPTI from now on (a first allocation's warm-up, a
      // governor's switch): the flush thread holds it until the process ends.
      g_hot_line.cupti_active.store(false, std::memory_order_release);
      return false;
    }
    timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  return true;
}

void Recorder::finish_trace(bool bounded) {
  if (allocation::exhausted()) {
    std::lock_guard<RankedMutex> lock(session_mutex_);
    notes_.push_back(
        "out of memory inside the shim: recording stopped there, and the process's later CUDA calls ran as "
        "without cuxfer (this trace ends early)");
  }
  finish_phase_.store("CUPTI's last records (its forced flush)", std::memory_order_release);
  if (!bounded) {
    CuptiCollector::instance().stop();
  } else if (!stop_cupti_bounded() && end_flush_.load(std::memory_order_acquire) != 2) {
    std::lock_guard<RankedMutex> lock(session_mutex_);
    notes_.push_back("cupti: its last flush of GPU records had not returned when the trace had to end (GPU work "
                     "still in flight, or a CUDA call that the end interrupted holding the driver): the trace ends "
                     "without the records it held, and their copies count as without a GPU record");
  }
  finish_phase_.store("the notes", std::memory_order_release);
  if (cupti_detaches_ > 0) {
    std::lock_guard<RankedMutex> lock(session_mutex_);
    notes_.push_back(cupti_detach_summary());
  }
  if (const unsigned n = cupti_warmups()) {
    std::lock_guard<RankedMutex> lock(session_mutex_);
    notes_.push_back("cupti: " + std::to_string(n) +
                     (n == 1 ? " context's" : " contexts'") +
                     " first GPU record made by the shim at the first device allocation (a 4-byte copy of its "
                     "own, not recorded), so that CUPTI's setup is not paid inside the app's first copy; " +
                     std::to_string(CuptiCollector::instance().ignored_records()) + " such record(s) left out");
  }
  if (const uint64_t n = CuptiCollector::instance().incomplete_records()) {
    std::lock_guard<RankedMutex> lock(session_mutex_);
    notes_.push_back("cupti: " + std::to_string(n) +
                     " GPU records came back unfinished from a forced flush (work still in flight when CUPTI "
                     "was detached or the process ended) and were left out: their copies count as without a "
                     "GPU record");
  }
  if (capture_range_) {
    std::string line;
    bool none;
    {
      std::lock_guard<RankedMutex> lock(capture_mutex_);
      const uint64_t now = now_ns();
      line = capture_.note(now, now - start_ns_, config().rewrite_any());
      none = capture_.ranges() == 0;
    }
    if (none) log::warn(line);
    std::lock_guard<RankedMutex> lock(session_mutex_);
    notes_.push_back(std::move(line));
  }
  if (std::string line = hook_time_summary(); !line.empty()) {
    std::lock_guard<RankedMutex> lock(session_mutex_);
    notes_.push_back(std::move(line));
  }
  if (NvtxRanges::instance().used()) {
    std::string line = nvtx_summary();
    std::lock_guard<RankedMutex> lock(session_mutex_);
    if (!line.empty()) notes_.push_back(std::move(line));
  }
  if (g_hot_line.stack_depth > 0) {
    std::string line = unwinder_summary();
    std::lock_guard<RankedMutex> lock(session_mutex_);
    if (!line.empty()) notes_.push_back(std::move(line));
  }
  finish_phase_.store("the last events and the end marker", std::memory_order_release);
  write_cycle(true);
  std::lock_guard<RankedMutex> lock(session_mutex_);
  if (writer_ && !config().launched)
    log::info("trace written to " + trace_path_ + " (" + std::to_string(events_recorded_) + " events)");
  writer_.reset();
}

void Recorder::finish_before_exit(int status) noexcept { finish_before_end(EndKind::Exit, status, nullptr); }

bool Recorder::finish_before_exec(const char* path) noexcept {
  return finish_before_end(EndKind::Exec, 0, path ? path : "?");
}

void Recorder::finish_before_signal(int sig) noexcept { finish_before_end(EndKind::Signal, sig, nullptr); }

bool Recorder::finish_before_end(EndKind kind, int status, const char* exec_path) noexcept {
  // A vfork child (and posix_spawn's) runs in this process's memory until it
  // execs or exits: it must not end its parent's trace. getpid() is a system
  // call (not cached since glibc 2.25), so it names the child there.
  if (pid_.load(std::memory_order_relaxed) != static_cast<int>(getpid())) return false;
  if (!claim_end()) {
    // Another thread's _exit is finishing the trace: ending the process now
    // would cut it, so this one waits for the same answer.
    if (exit_requested_.load(std::memory_order_acquire)) await_exit_finish();
    return false;
  }
  // From here every hook passes through; the writer drains what the rings hold.
  exit_status_.store(status, std::memory_order_relaxed);
  end_kind_ = kind;
  if (kind == EndKind::Exec) {
    size_t n = 0;
    for (; n < kExecPathMax && exec_path[n]; ++n) exec_path_[n] = exec_path[n];
    exec_path_[n] = '\0';
  }
  end_requested_ns_.store(now_ns(), std::memory_order_release);  // clock_gettime: async-signal-safe
  exit_requested_.store(true, std::memory_order_release);
  await_exit_finish();
  return true;
}

void Recorder::await_exit_finish() noexcept {
  const uint64_t deadline = now_ns() + kExitFinishNs;
  while (!exit_finished_.load(std::memory_order_acquire)) {
    if (now_ns() >= deadline) {
      // The writer is stuck (a lock the interrupted caller holds, a hung file
      // system): the process must still end. The trace ends early, as an
      // _exit's did before.
      // write(2) alone: the caller may be a signal handler.
      static constexpr char kLate[] =
          "cuxfer: the trace was not finished within 2 s of the process's end (_exit, execve or an end signal); "
          "it ends where the writer got to, which was still at: ";
      const char* phase = finish_phase_.load(std::memory_order_acquire);
      if (!phase) phase = "its last cycle before the finish";
      [[maybe_unused]] ssize_t w = write(STDERR_FILENO, kLate, sizeof kLate - 1);
      w = write(STDERR_FILENO, phase, strlen(phase));
      w = write(STDERR_FILENO, "\n", 1);
      return;
    }
    timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
}

void Recorder::prepare_fork() {
  // Hold the writer's lock across fork so that the child never inherits it
  // locked by a thread that does not exist there. In rank order
  // (core/ranked_lock.h), the order other threads nest them: every lock under
  // which the shim allocates or frees (the session's, the collector's, the
  // NVTX names') before host_ranges', which the libc hooks take inside that
  // allocation or free. The writer holds the collector's handover lock across
  // CUPTI's flush, whose completion callback frees a 4 MiB buffer
  // (e2e.rewrite.fork_during_flush), and a thread interning a new NVTX name
  // grows the name table under the NVTX lock (e2e.rewrite.fork_stress.nvtx):
  // taking host_ranges first here deadlocked a forking app against each.
  //
  // The writer holds the session's lock and the collector's across CUDA and
  // CUPTI calls (govern_cupti's attach and detach, the flush). A driver's own
  // fork handler runs before this one (it registered later) and may hold a
  // lock such a call needs: waiting for ours without end would then never
  // end (e2e.cupti_gate.fork_driver_lock models it). So those two are waited
  // for kForkWaitNs at most, and a fork that goes ahead without them leaves
  // a child that records nothing (forsake_after_fork_child). A child of a
  // process that is recording cannot use CUDA anyway: CUDA does not survive
  // a fork once initialised. The other locks are never held across a CUDA
  // call.
  //
  // First, before any lock: every singleton the child's handlers use is made
  // (a function-local static's first construction is a lock too: a child
  // forked while another thread was inside it waits for ever), and every
  // table is reached (a first use allocates).
  if (auto before = before_fork_.load(std::memory_order_acquire)) before();
  CuptiCollector& collector = CuptiCollector::instance();
  python::PythonStacks::instance();
  NvtxRanges& nvtx = NvtxRanges::instance();
  HostRanges& ranges = host_ranges();
  AllocationTable& table = allocation_table();
  const uint64_t deadline = now_ns() + kForkWaitNs;
  fork_writer_locked_ = lock_before(session_mutex_, deadline);
  capture_mutex_.lock();
  if (fork_writer_locked_ && !collector.lock_for_fork(deadline)) {
    session_mutex_.unlock();
    fork_writer_locked_ = false;
  }
  nvtx.lock_for_fork();
  ranges.lock_for_fork();
  table.lock_for_fork();
}

void Recorder::after_fork_parent() {
  allocation_table().unlock_after_fork();
  host_ranges().unlock_after_fork();
  NvtxRanges::instance().unlock_after_fork();
  capture_mutex_.unlock();
  if (fork_writer_locked_) {
    CuptiCollector::instance().unlock_after_fork();
    session_mutex_.unlock();
  }
}

void Recorder::forsake_after_fork_child() {
  // Nothing the two locks guard is touched: the writer (not here) may have
  // been changing it. Recording is off for good in this child; its hooks pass
  // through, and its exit writes nothing.
  remake_in_fork_child(session_mutex_);
  CuptiCollector::instance().forsake_after_fork();
  capture_mutex_.unlock();
  if (auto child = in_fork_child_.load(std::memory_order_acquire)) child();
  g_hot_line.recorder_state.store(kOff, std::memory_order_relaxed);
  driver_state_.store(0, std::memory_order_relaxed);
  t_state.driver_attached = false;
  t_state.tid = static_cast<uint32_t>(gettid());
  static constexpr char kLine[] =
      "cuxfer: this fork child is not recorded (the fork did not wait for the trace writer, busy in a CUDA call)\n";
  [[maybe_unused]] const ssize_t w = write(STDERR_FILENO, kLine, sizeof kLine - 1);
}

void Recorder::after_fork_child() {
  allocation_table().unlock_after_fork();
  host_ranges().unlock_after_fork();
  NvtxRanges::instance().unlock_after_fork();
  if (!fork_writer_locked_) return forsake_after_fork_child();
  CuptiCollector::instance().unlock_after_fork();
  {
    // The child's trace counts its own ranges: one open from the fork when
    // the parent was inside one.
    const bool inside = capture_.inside();
    capture_ = CaptureRanges{};
    if (inside) capture_.start(now_ns());
    capture_mutex_.unlock();
  }
  if (auto child = in_fork_child_.load(std::memory_order_acquire)) child();
  // The child writes its own trace, lazily, if it uses CUDA; events buffered
  // before the fork belong to the parent's trace.
  bool parent_used_cupti = CuptiCollector::instance().active();
  CuptiCollector::instance().abandon_after_fork();
  writer_.reset();
  writer_thread_.forget();  // that thread does not exist here
  stop_ = false;
  // Forked while another thread waited in _exit: the child's trace is its own.
  exit_requested_.store(false, std::memory_order_relaxed);
  exit_finished_.store(false, std::memory_order_relaxed);
  finish_phase_.store(nullptr, std::memory_order_relaxed);
  end_flush_.store(0, std::memory_order_relaxed);  // a parent's flush thread does not exist here
  end_requested_ns_.store(0, std::memory_order_relaxed);
  notes_.clear();
  governed_.store(false, std::memory_order_relaxed);
  governor_ = GovernorState{};
  cupti_detaches_ = cupti_attaches_ = 0;
  cupti_detach_ns_ = cupti_attach_ns_ = 0;
  gate_changes_.clear();
  g_hot_line.copy_records_on.store(true, std::memory_order_relaxed);
  EventRing* mine = t_state.ring;
  rings_.for_each([&](EventRing& r) {
    r.reset();
    r.forget_hook_time();
    r.state.store(&r == mine ? EventRing::kOwned : EventRing::kFree, std::memory_order_relaxed);
  });
  callsites_.mark_all_unwritten();
  NvtxRanges::instance().mark_all_unwritten();
  // The child's trace starts without the ranges the forking thread has open:
  // its first event says them again.
  t_state.nvtx_changed = t_state.nvtx_changed || t_state.nvtx_depth > 0;
  python::PythonStacks::instance().mark_all_unwritten();
  modules_.forget_written();
  t_state.tid = static_cast<uint32_t>(gettid());
  int s = g_hot_line.recorder_state.load(std::memory_order_relaxed);
  if (s == kRecording || s == kStarting) g_hot_line.recorder_state.store(kIdle, std::memory_order_relaxed);
  driver_state_.store(0, std::memory_order_relaxed);
  t_state.driver_attached = false;  // the child attaches again (its CUPTI, its notes)
  simulated_ = false;
  cupti_state_ = 0;
  cupti_reason_.clear();
  if (parent_used_cupti) cupti_forbidden_ = true;
  session_mutex_.unlock();
}

}  // namespace cuxfer::shim
