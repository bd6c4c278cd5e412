// The model of one recorded job: every trace of it (one per process: a fork
// tree, MPI ranks), each event classified and joined with its GPU records, and
// each captured stack reduced to the user's call site.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/model/classify.h"
#include "analyzer/model/cupti_gate.h"
#include "analyzer/symbolize/frame.h"
#include "analyzer/symbolize/frame_filter.h"
#include "analyzer/symbolize/symbolizer.h"
#include "trace/reader.h"
#include "trace/shim_names.h"

namespace cuxfer::model {

inline constexpr uint32_t kNoSite = std::numeric_limits<uint32_t>::max();
inline constexpr uint32_t kNoCall = std::numeric_limits<uint32_t>::max();

// More than any one call can move or allocate (a PiB), or more than a job's
// calls can move in all (2^63 bytes, which also leaves every sum of a subset
// of them, and its double, room in 64 bits): an event claiming it comes from
// a damaged or crafted trace. Counted as a call, its bytes as 0, and said in
// a note, so that no total carries (or wraps around) a size that never was.
inline constexpr uint64_t kImpossibleBytes = 1ull << 50;
inline constexpr uint64_t kImpossibleJobBytes = 1ull << 63;

// Trace call-site id -> job site, looked up for every event. The shim numbers
// call sites densely from 1, so a flat table serves; a trace whose ids are
// sparse (it is untrusted input) gets a hash map instead.
class SiteIndex {
 public:
  SiteIndex() = default;
  explicit SiteIndex(const std::unordered_map<uint32_t, uint32_t>& site_of_id) {
    uint32_t max_id = 0;
    for (const auto& [id, site] : site_of_id) max_id = std::max(max_id, id);
    if (max_id <= 4 * site_of_id.size() + 4096) {
      dense_.assign(size_t{max_id} + 1, kNoSite);
      for (const auto& [id, site] : site_of_id) dense_[id] = site;
    } else {
      sparse_ = site_of_id;
    }
  }
  // kNoSite for an id without a site.
  uint32_t find(uint32_t id) const {
    if (!sparse_.empty()) {
      auto it = sparse_.find(id);
      return it == sparse_.end() ? kNoSite : it->second;
    }
    return id < dense_.size() ? dense_[id] : kNoSite;
  }

 private:
  std::vector<uint32_t> dense_;
  std::unordered_map<uint32_t, uint32_t> sparse_;
};

struct Process {
  trace::Trace trace;
  // CUPTI was active in this process: its events carry GPU time where a GPU
  // record matched. Otherwise only CPU-blocked time is known.
  bool gpu_timing = false;
  uint64_t gpu_records_unmatched = 0;       // GPU copy/memset records no event claimed
  uint64_t events_without_gpu = 0;          // events flagged GPU-expected that got no record
  uint64_t gpu_records_joined_by_time = 0;  // records without a correlation id, joined by time
  GateStats gate;                           // the CUPTI governor's doing (gpu_timing only)
  // Events and GPU records read from the trace (its vectors' sizes; kept
  // apart, as a process made from a summary holds none of them).
  uint64_t events_read = 0, gpu_records_read = 0;
  // Per trace.gpu_records entry: the index into Job::calls of the call it was
  // joined to, or kNoCall (unjoined, kernel, or no GPU timing).
  std::vector<uint32_t> gpu_record_call;
  // This process's sites are Job::sites from first_site on; site_index maps
  // its trace's call-site ids to them (what a streamed call looks up).
  uint32_t first_site = 0;
  SiteIndex site_index;
  // Job::notes up to here (before the symbolizer's, put first at the end) are
  // those of this process and the ones before it: where a streamed process's
  // own notes go.
  uint32_t notes_end = 0;
  // Its trace's NVTX range stack ids -> Job::ranges indexes (empty without
  // NVTX): what a streamed call's range is looked up in (CallFeed).
  std::unordered_map<uint32_t, uint32_t> range_of_stack;

  uint32_t pid() const { return trace.has_process ? trace.process.pid : 0; }
  // CLOCK_REALTIME of a CLOCK_MONOTONIC timestamp of this process (processes
  // on different hosts share no monotonic clock).
  uint64_t realtime_of(uint64_t monotonic_ns) const {
    return trace.process.start_realtime_ns + (monotonic_ns - trace.process.start_monotonic_ns);
  }
};

// One event, classified and joined. Points into its process's trace.
// Fields are ordered so that no padding is needed (56 bytes, not 64): a job
// holds one per event and every pass over the calls reads them all
// (docs/benchmarks.md, "Analyzer throughput").
struct Call {
  const trace::Event* event = nullptr;
  uint32_t process = 0;     // index into Job::processes
  uint32_t site = kNoSite;  // index into Job::sites
  TransferClass cls;
  uint32_t gpu_records = 0;  // how many GPU records joined (2D/batch copies have several)
  uint64_t gpu_ns = 0;       // sum of the durations of its GPU records
  uint64_t gpu_bytes = 0;    // bytes of those records (a staged copy's chunks add up to bytes())
  uint64_t gpu_begin_ns = 0, gpu_end_ns = 0;  // first DMA start, last DMA end

  trace::EventKind kind() const { return static_cast<trace::EventKind>(event->kind); }
  bool failed() const { return event->flags & trace::kFlagFailed; }
  bool async() const { return event->flags & trace::kFlagAsync; }
  // The rewrite ran this copy through the shim's pinned staging pool.
  bool staged() const { return event->flags & trace::kFlagStaged; }
  // The rewrite ran this copy on a host range it registered in place.
  bool registered() const { return event->flags & trace::kFlagRegistered; }
  // Why the rewrite left this copy as made (None: no reason recorded; may be
  // a value this build does not know, from a newer shim).
  trace::PassthroughReason passthrough() const {
    return static_cast<trace::PassthroughReason>(event->passthrough);
  }
  bool has_gpu_time() const { return gpu_records > 0; }
  uint64_t bytes() const { return event->bytes; }
  uint64_t cpu_ns() const {
    return event->t_exit_ns > event->t_enter_ns ? event->t_exit_ns - event->t_enter_ns : 0;
  }
};

static_assert(sizeof(Call) == 56, "see the field order note above");

// A user call site: the frame chosen from a captured stack (see frame_filter.h).
struct Site {
  uint32_t process = 0;
  symbolize::Frame frame;
  std::vector<symbolize::Frame> stack;  // the whole captured stack, innermost first
};

// An NVTX range stack a call ran in (trace/event.h EventKind::NvtxRanges),
// outermost first. A name is the range's message, "domain::message" outside
// NVTX's default domain, made valid UTF-8 (other bytes become U+FFFD).
inline constexpr uint32_t kNoRange = std::numeric_limits<uint32_t>::max();
struct RangeStack {
  std::vector<std::string> names;
  std::string path() const;  // "outer / inner"
};

// API names the shim gives its own work (trace/shim_names.h): events under
// them are not the app's calls.
inline constexpr const char* kShimApiPrefix = trace::kShimApiPrefix;
inline constexpr const char* kStagingPoolApi = trace::kStagingPoolApiName;
inline constexpr const char* kRegisterApi = trace::kRegisterApiName;

// The process ran with the pinned rewrite on (CUXFER_REWRITE=pin): its
// RunModes block says so; a trace written before that block, its notes.
bool rewrite_pin_on(const trace::Trace& t);
// ... or with the rewrite's machinery for a policy file (CUXFER_POLICY).
bool rewrite_any_on(const trace::Trace& t);

class Job {
 public:
  std::vector<Process> processes;
  std::vector<Call> calls;  // the app's calls: process order, then trace order
  // The shim's own events (API name beginning "cuxfer:", e.g. the staging
  // pool's allocation). Never in `calls`, so no app total counts them.
  std::vector<Call> shim_calls;
  std::vector<Site> sites;
  std::vector<std::string> notes;  // symbolization notes, each once
  // NVTX ranges: the stacks met, and per call (parallel to `calls`) the stack
  // it ran in or kNoRange. Empty when no process recorded a range.
  std::vector<RangeStack> ranges;
  std::vector<uint32_t> call_ranges;
  uint32_t range_of(size_t call_index) const {
    return call_index < call_ranges.size() ? call_ranges[call_index] : kNoRange;
  }

  Job() = default;
  Job(const Job&) = delete;  // calls point into processes
  Job& operator=(const Job&) = delete;
  Job(Job&&) = default;
  Job& operator=(Job&&) = default;
};

// Builds the model from traces already read. Takes ownership of them.
// `python_sites`: which Python frame names a Python call site (frame_filter.h).
Job build_job(std::vector<trace::Trace> traces, symbolize::Symbolizer& symbolizer,
              const symbolize::PythonSiteRule& python_sites = {});

// Streaming: a job whose events are never all in memory (a report of a
// trace of millions of events). Its frame is build_job of the traces read
// without their events (trace::EventBlocks::skip): processes, sites, notes,
// no calls. Each process's events are then read again a block at a time and
// a CallFeed makes their calls exactly as build_job does, numbered as in a
// job of that one process (Call::process 0, Call::site an index into the
// process's own sites), so that each process is tallied on its own and the
// tallies merged (analyses/summary.h). Only for processes whose calls need
// nothing beyond their own event, or GPU records joined by time
// (StreamedGpuJoin, gpu_join.h, the governor's second pass included), read
// as the frame was, without keeping them (trace::EventBlocks::skip_gpu_records):
// no record joined another way. NVTX range stacks are replayed by the feed
// as build_job replays them (the shim's range events and the calls are still
// in trace order there).
bool calls_stream(const Process& p);

// Each thread's current NVTX range stack, replayed in trace order: a shim
// event of kind NvtxRanges sets its thread's stack; every app call runs in
// its thread's. One per process (a thread's events are in its own order in
// its process's trace).
class RangeReplay {
 public:
  explicit RangeReplay(const Process& p) : range_of_stack_(p.range_of_stack) {}
  // The range stack (Job::ranges index, or kNoRange) of the app call `e`;
  // for a shim event, kNoRange after taking in the stack it sets, if any.
  uint32_t next(const trace::Event& e, bool shim) {
    if (shim) {
      if (e.kind == static_cast<uint8_t>(trace::EventKind::NvtxRanges))
        range_of_thread_[e.thread_id] = find(e.callsite_id);
      return kNoRange;
    }
    auto it = range_of_thread_.find(e.thread_id);
    return it != range_of_thread_.end() ? it->second : kNoRange;
  }

 private:
  uint32_t find(uint32_t stack_id) const {
    if (stack_id == 0) return kNoRange;
    auto it = range_of_stack_.find(stack_id);
    return it != range_of_stack_.end() ? it->second : kNoRange;
  }
  const std::unordered_map<uint32_t, uint32_t>& range_of_stack_;
  std::unordered_map<uint32_t, uint32_t> range_of_thread_;
};

class CallFeed {
 public:
  // Process `process` of `job`, the frame (built from traces without events).
  CallFeed(const Job& job, uint32_t process);
  // The calls of one block of events, which must outlive them, into `calls`
  // and `shim_calls` (cleared first); with `call_ranges`, per call of
  // `calls` its NVTX range stack (Job::ranges index, or kNoRange), or none
  // at all where the process recorded no range (cleared first).
  void add(std::span<trace::Event> events, std::vector<Call>& calls, std::vector<Call>& shim_calls,
           std::vector<uint32_t>* call_ranges = nullptr);
  // The process recorded NVTX ranges: add() gives each call its range stack.
  bool has_ranges() const { return ranges_.has_value(); }
  // The event is the shim's own work (build_job keeps it out of Job::calls).
  bool is_shim(const trace::Event& e) const { return e.api < shim_api_.size() && shim_api_[e.api]; }
  uint64_t events() const { return events_; }
  // The sum of the events' bytes (what build_job bounds over the whole job).
  uint64_t bytes() const { return bytes_; }
  // The note build_job makes of events that claim impossible sizes, if any.
  std::optional<std::string> impossible_note() const;

 private:
  const SiteIndex& sites_;
  uint32_t first_site_;
  uint32_t pid_;
  std::vector<bool> shim_api_;
  std::optional<RangeReplay> ranges_;
  uint64_t events_ = 0, bytes_ = 0, impossible_ = 0, largest_impossible_ = 0;
};

// Keeps only the calls that ran inside an NVTX range named `name` (a
// message, "domain::message", or a whole "outer / inner" path) at any depth;
// GPU records of the others no longer point at a call. Returns how many
// calls were kept.
size_t keep_range(Job& job, const std::string& name);
// Which of `ranges` (Job::ranges) hold the range `name`, as keep_range
// chooses them: by Job::ranges index.
std::vector<bool> stacks_holding(const std::vector<RangeStack>& ranges, const std::string& name);

// Reads each path; a trace that cannot be used (missing, empty, foreign,
// unsupported) adds one line to `errors` and is skipped.
std::vector<trace::Trace> read_traces(const std::vector<std::string>& paths,
                                      std::vector<std::string>& errors, const trace::EventBlocks& events = {});

}  // namespace cuxfer::model
