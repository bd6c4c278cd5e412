// The model of one recorded job: every trace of it (one per process: a fork
// tree, MPI ranks), each event classified and joined with its GPU records, and
// each captured stack reduced to the user's call site.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
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

// Keeps only the calls that ran inside an NVTX range named `name` (a
// message, "domain::message", or a whole "outer / inner" path) at any depth;
// GPU records of the others no longer point at a call. Returns how many
// calls were kept.
size_t keep_range(Job& job, const std::string& name);

// Reads each path; a trace that cannot be used (missing, empty, foreign,
// unsupported) adds one line to `errors` and is skipped.
std::vector<trace::Trace> read_traces(const std::vector<std::string>& paths,
                                      std::vector<std::string>& errors);

}  // namespace cuxfer::model
