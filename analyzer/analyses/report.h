// Everything a report says, computed from the model by pure functions and
// rendered by render/. Bytes and nanoseconds are exact integers; optional
// values are absent when the trace cannot support them (no GPU time, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/analyses/ranks.h"
#include "analyzer/model/job.h"
#include "analyzer/model/machine_profile.h"

namespace cuxfer::analyses {

// Thresholds and reference numbers the findings use. Defaults are the
// documented ones (docs/report.md); tests and options may change them.
struct Thresholds {
  uint64_t large_bytes = 1u << 20;          // large_pageable: each transfer at least this
  uint64_t tiny_bytes = 4096;               // tiny_storm: each copy at most this
  uint64_t storm_calls = 1000;              // tiny_storm: at least this many from one site
  double nominal_pinned_gbps = 50.0;        // pinned PCIe bandwidth when the run measured none
  uint64_t nominal_async_return_ns = 3000;  // an async copy from pinned memory returns in ~3 us
  // This machine's measured curves (cuxfer calibrate), when the report found
  // one for the traces' host: estimates then use its pinned bandwidth at each
  // transfer's size instead of what the run measured or the nominal figure.
  const model::MachineProfile* profile = nullptr;
  // The shim's defaults, for the rewrite what-if without a profile.
  uint64_t stage_min_h2d = 8u << 20, stage_min_d2h = 256u << 10, register_min = 1u << 20;
  // The run's own references, when a pass before the tally's measured them
  // (a streamed report, analyses/stream.h): the async_pageable and
  // large_pageable copies are then summed per site as the tally meets them,
  // instead of listed until the references are known.
  struct RunReferences {
    std::optional<uint64_t> async_return_ns[2];  // per direction (0 H2D, 1 D2H): median, pinned async copies
    std::optional<double> pinned_gbps[2];        // per direction: large pinned transfers
  };
  const RunReferences* known = nullptr;
};

struct ProcessSummary {
  uint32_t pid = 0, ppid = 0;
  std::string exe, hostname, trace_name, trace_path, cuxfer_version;
  std::vector<std::string> argv;
  uint64_t start_realtime_ns = 0;
  bool complete = false;
  std::string cut_reason;
  std::string cupti_state;  // "active" | "unavailable" | "unknown"
  std::string cupti_reason;
  // The app's profiler took CUPTI over this many seconds after the shim
  // started (-1: never): GPU records end there, CPU timing after.
  double cupti_handover_s = -1;
  std::string cupti_handover_reason;
  // CUPTI's copy records under the shim's governor (CUXFER_CUPTI=auto):
  // when they were on, and which copies have GPU time because of it.
  model::GateStats cupti_gate;
  bool simulated = false;
  uint64_t events = 0, events_dropped = 0, gpu_records = 0, gpu_records_dropped = 0;
  uint64_t callsites_dropped = 0, gpu_records_unmatched = 0, events_without_gpu = 0;
  uint64_t gpu_records_joined_by_time = 0;
  uint64_t copies = 0, bytes = 0, cpu_blocked_ns = 0, failed_calls = 0;
  uint32_t stack_depth = 0;
  std::vector<std::string> notes;  // the shim's own notes from the trace
};

struct Totals {
  uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0;
  uint64_t failed_calls = 0;  // not in calls/bytes/time
};

struct ClassTotals {
  model::TransferClass cls;
  uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0, failed_calls = 0, async_calls = 0;
  uint64_t staged_calls = 0, staged_bytes = 0;  // of calls/bytes: through the rewrite's pinned staging
  std::optional<uint64_t> gpu_ns;  // set when at least one call had GPU time
  uint64_t gpu_calls = 0;          // calls with GPU time
  std::optional<double> gbps;      // decimal GB/s (1e9 bytes per second)
  std::string gbps_basis;          // "gpu" | "cpu" | "" (none: see docs/report.md)
};

struct AllocTotals {
  uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0, frees = 0;
};

struct Allocations {
  AllocTotals device, managed, host_pinned, host_registered;
};

struct ApiTotals {
  std::string name;
  uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0, failed_calls = 0;
};

struct PageableShare {
  uint64_t pageable_bytes = 0, host_bytes = 0;
  double fraction = 0.0;
};

// Pageable copies the rewrite left as made for one reason, as the shim
// recorded it where it decided (trace::PassthroughReason). Copies below the
// staging threshold are counted per direction: each has its own threshold.
struct PassthroughReasonTotals {
  std::string reason;     // trace::to_string(PassthroughReason): "below_threshold", ..., "not_recorded"
  std::string direction;  // below_threshold: "H2D" or "D2H"; otherwise empty
  std::optional<uint64_t> threshold_bytes;  // below_threshold: the threshold the traces name, when they agree
  std::string text;       // what the report says: "below the staging threshold (CUXFER_STAGE_MIN_H2D 8 MiB)"
  uint64_t calls = 0, bytes = 0;
};

// What the pinned rewrite (`cuxfer record --rewrite=pin`, CUXFER_REWRITE=pin)
// did. Staging copies every byte twice, as the driver's pageable path does:
// it saves time, not bytes (docs/report.md).
struct RewriteTotals {
  bool active = false;  // some process ran with the rewrite on (its note, a staged copy or the pool)
  uint64_t staged_calls = 0, staged_bytes = 0;          // through the shim's pinned staging pool
  // What pinning at the source would bring beyond the rewrite (PyTorch's
  // pin_memory=True, cudaHostAlloc): the staged copies' time in the app's
  // calls, and an estimate of the same copies from pinned memory: async ones
  // return once queued (Thresholds::nominal_async_return_ns each), sync ones
  // move their bytes at the pinned bandwidth (the machine profile's at their
  // mean size, else the nominal figure). `pinned_basis` says which.
  uint64_t staged_cpu_ns = 0, staged_async_calls = 0;
  uint64_t staged_sync_bytes[2] = {0, 0}, staged_sync_calls[2] = {0, 0};  // 0 H2D, 1 D2H
  uint64_t staged_if_pinned_ns = 0;
  std::string pinned_basis;
  uint64_t registered_calls = 0, registered_bytes = 0;  // through in-place registration
  // H2D/D2H copies with a pageable host side that neither: left as made.
  uint64_t passthrough_pageable_calls = 0, passthrough_pageable_bytes = 0;
  // The same copies per reason, most bytes first; they add up to the two above.
  std::vector<PassthroughReasonTotals> passthrough_reasons;
  uint64_t pool_allocations = 0;  // the shim's staging pool allocations (not the app's)
  uint64_t pool_bytes = 0;        // pinned bytes the pool holds
  uint64_t pinning_cost_ns = 0;   // time the shim spent allocating (pinning) the pool
  uint64_t registrations = 0;     // in-place registrations the shim made
  uint64_t registration_bytes = 0;  // bytes they pinned (page-aligned ranges)
  uint64_t registration_cost_ns = 0;  // time spent registering (including evictions made for room)
  uint64_t registrations_refused = 0;  // cuMemHostRegister refused (the buffers were staged instead)
  // The zero-copy path (a policy's zero_copy entries): device allocations
  // backed by mapped host memory, and copies into or out of them (host memcpys
  // in stream order, or the driver's copy when work was pending).
  uint64_t zero_copy_allocations = 0, zero_copy_allocation_bytes = 0;
  uint64_t zero_copy_calls = 0, zero_copy_bytes = 0;
};

// Copies per process and device (device -1: the call had no current device).
struct DeviceTotals {
  uint32_t pid = 0;
  int device = -1;
  uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0;
  uint64_t h2d_bytes = 0, d2h_bytes = 0, d2d_bytes = 0, peer_bytes = 0, pageable_bytes = 0;
  std::optional<uint64_t> gpu_ns;
};

// Peer (GPU to GPU across devices) copies per process and device pair.
// Device -1: the shim could not tell (a trace from before pairs were recorded).
struct PeerPair {
  uint32_t pid = 0;
  int src_device = -1, dst_device = -1;
  uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0;
  std::optional<uint64_t> gpu_ns;
};

// Copy/compute overlap per process and device (needs kernel records:
// `cuxfer record --kernels`).
struct DeviceOverlap {
  uint32_t pid = 0, device = 0;
  uint64_t kernels = 0, kernel_busy_ns = 0;  // kernel records; time with at least one kernel running
  uint64_t dma_ns = 0, dma_under_kernels_ns = 0;  // copies' GPU time, and the part under kernels
  // Synchronous copies between the device's first and last kernel: their
  // CPU-blocked time, and the part with no kernel running.
  uint64_t sync_copy_ns = 0, sync_copy_idle_ns = 0;
};

struct Overlap {
  bool kernels_recorded = false;  // some process recorded kernels
  std::vector<DeviceOverlap> devices;
};

// Unified (managed) memory traffic from CUPTI's unified-memory records, per
// process and allocation site (the call site of the cudaMallocManaged /
// cuMemAllocManaged whose range holds the migrated or faulting address).
struct ManagedTotals {
  uint32_t pid = 0;
  uint32_t callsite = 0;  // 0: the allocation's site is unknown (or the address is in no recorded allocation)
  symbolize::Frame frame; // the allocation's call site, as the call-site table names it (callsite != 0)
  uint64_t allocations = 0, allocated_bytes = 0;
  uint64_t htod_bytes = 0, dtoh_bytes = 0, htod_migrations = 0, dtoh_migrations = 0;
  // Of those: migrated because something touched a page that was elsewhere,
  // including the driver's speculative migration around such a fault.
  uint64_t on_demand_bytes = 0;
  uint64_t prefetched_bytes = 0;  // of those: moved by the app's cudaMemPrefetchAsync
  uint64_t migration_ns = 0;      // summed durations of the migrations
  uint64_t on_demand_ns = 0;      // time with an on-demand migration or GPU fault being served (union)
  uint64_t gpu_fault_groups = 0, cpu_faults = 0;
};

struct Managed {
  bool records_on = false;  // some process recorded unified-memory records
  std::vector<std::string> unavailable;  // why other processes with managed memory could not
  ManagedTotals total;      // pid and callsite unused
  std::vector<ManagedTotals> sites;  // most on-demand time first
};

struct CallSiteTotals {
  uint32_t id = 0;  // Job::sites index + 1; findings refer to it
  uint32_t pid = 0;
  symbolize::Frame frame;
  std::vector<symbolize::Frame> stack;
  uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0, max_cpu_ns = 0, failed_calls = 0;
  std::optional<uint64_t> gpu_ns;
  // Of `bytes`, those of the copies the rewrite staged (--csv's staged_bytes):
  // from the tally, so that a streamed report and a report of summaries have it.
  uint64_t staged_bytes = 0;
  // The class with most bytes at this site, "+N" when N other classes occur
  // there too: "H2D pageable", "H2D pageable +2".
  std::string main_class;
};

// One line of code across a job's processes: ranks, a Pool's workers and
// the like run the same code, and each process has its own call sites
// (CallSiteTotals). Sites are one location when site_key() of their frames
// is equal (a Python line's file, line and function; a native frame's module
// base name and function, or offset). The report's tables show locations; a
// job of one process has one site per location.
struct LocationTotals {
  std::string key;                  // site_key() of the frame
  std::vector<uint32_t> callsites;  // its sites' ids, most CPU-blocked time first
  std::vector<uint32_t> pids;       // their processes, in callsites' order, each once
  // Of its first (most CPU-blocked) site: the id and pid the text shows, the
  // frame and the stack.
  uint32_t id = 0;
  uint32_t pid = 0;
  symbolize::Frame frame;
  std::vector<symbolize::Frame> stack;
  bool stacks_differ = false;  // another site's stack is not the first's, frame by frame (site_key)
  uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0, max_cpu_ns = 0, failed_calls = 0;
  std::optional<uint64_t> gpu_ns;  // set when one of its sites has GPU time
  std::string main_class;          // as CallSiteTotals', over all its sites' copies
};

struct FindingSite {
  uint32_t callsite = 0;
  uint64_t calls = 0, bytes = 0, time_ns = 0, max_ns = 0;
  std::optional<uint64_t> estimated_recoverable_ns;
  std::optional<double> achieved_gbps;
  std::optional<double> calls_per_second;
  uint32_t processes = 1;  // in Finding::locations: the processes whose sites it sums
};

// Every finding the analyses raise (docs/report.md, "Findings"). The name is
// what the reports, the policy file's "findings" and the docs call it.
enum class FindingKind : uint8_t {
  AsyncPageable,
  LargePageable,
  TinyStorm,
  RewriteCandidates,
  SyncCopyIdle,
  DuplicateUploads,
  RoundTrips,
  ManagedMigrations,
};
inline constexpr FindingKind kAllFindingKinds[] = {
    FindingKind::AsyncPageable,     FindingKind::LargePageable, FindingKind::TinyStorm,
    FindingKind::RewriteCandidates, FindingKind::SyncCopyIdle,  FindingKind::DuplicateUploads,
    FindingKind::RoundTrips,        FindingKind::ManagedMigrations};
// "async_pageable", "large_pageable", ...
const char* finding_kind_name(FindingKind k);
bool parse_finding_kind(std::string_view name, FindingKind& out);

struct Finding {
  FindingKind kind = FindingKind::AsyncPageable;
  std::string title;
  uint64_t calls = 0, bytes = 0, time_ns = 0, max_ns = 0;
  std::string time_basis;  // what time_ns measures: "cpu_blocked" | "gpu"
  std::optional<uint64_t> estimated_recoverable_ns;
  std::vector<uint32_t> callsites;
  std::vector<FindingSite> sites;  // per call site, largest time first
  // The sites by location (finding_locations), largest time first: callsite
  // is the location's id (LocationTotals::id), the numbers its sites' sums.
  std::vector<FindingSite> locations;
  std::optional<double> achieved_gbps, reference_gbps, calls_per_second;
  std::string reference_source;  // where reference_gbps comes from
  std::string advice;
};

// The findings' estimates overlap: the same pageable copies are an
// async_pageable, a large_pageable and a rewrite_candidates finding at once.
// Combined, each call site counts once: the largest of its findings'
// estimates, at most the time its copies took. Set when two or more findings
// have estimates.
struct CombinedEstimate {
  uint64_t recoverable_ns = 0;  // each site once
  uint64_t sum_ns = 0;          // the findings' estimates added up (what the list suggests)
  uint32_t findings = 0;        // findings with an estimate
};
std::optional<CombinedEstimate> combine_estimates(const std::vector<Finding>& findings);

// Copies per NVTX range (ranges.cpp): each range the app pushed, with what
// the copies made inside it moved, how long they held their threads and the
// GPU, and which findings their call sites raised. A range's totals include
// its nested ranges' ("train" holds "train / forward").
struct RangeClass {
  std::string cls;  // "H2D pageable"
  uint64_t calls = 0, bytes = 0;
};

struct RangeFinding {
  std::string kind;    // finding_kind_name
  uint64_t calls = 0;  // the range's copies made at the finding's call sites
};

struct RangeTotals {
  std::string path;  // "train / forward"
  std::string name;  // its innermost range: "forward"
  uint32_t depth = 0;  // 1: outermost
  uint64_t calls = 0, bytes = 0, pageable_bytes = 0, cpu_blocked_ns = 0, failed_calls = 0;
  std::optional<uint64_t> gpu_ns;  // set when one of its copies had GPU time
  uint64_t gpu_calls = 0;
  std::vector<RangeClass> classes;      // most bytes first
  std::vector<RangeFinding> findings;   // most calls first
};

struct Report {
  std::string schema = "cuxfer.report/1";
  bool simulated = false;
  std::string timing = "cpu";  // "gpu" when every process with copies had CUPTI active
  std::string program;         // the root process's executable
  std::vector<std::string> argv;
  uint64_t start_realtime_ns = 0;
  uint64_t span_ns = 0;  // first process start to the last recorded call's end
  std::vector<ProcessSummary> processes;
  Totals totals;
  std::vector<ClassTotals> classes;
  Totals memsets;
  Allocations allocations;
  std::vector<ApiTotals> apis;
  PageableShare pageable_share;
  RewriteTotals rewrite;
  Overlap overlap;
  Managed managed;
  std::optional<CombinedEstimate> combined_estimate;
  std::vector<DeviceTotals> devices;  // per process and device
  std::vector<PeerPair> peer_pairs;   // per process and (source, destination) device
  std::vector<CallSiteTotals> callsites;  // all, most CPU-blocked time first
  std::vector<LocationTotals> locations;  // the callsites by location, most CPU-blocked time first
  uint64_t calls_without_site = 0;        // copies with no captured call site
  std::vector<Finding> findings;
  std::vector<RangeTotals> ranges;  // NVTX ranges that held copies; empty without NVTX
  Ranks ranks;  // per rank and the spread across ranks; empty unless two ranks or more (ranks.h)
  std::vector<std::string> notes;  // symbolization and other caveats, each once
};

// The whole report of a job.
Report analyze(const model::Job& job, const Thresholds& thresholds = {});

// How much of the job's traces could be read: a trace cut short (killed
// process, full disk, a damaged copy) ends at its last complete block, so
// whatever the report finds, or does not find, is about that part only.
struct ReadExtent {
  size_t traces = 0, cut = 0;  // processes, and those whose trace is cut short
  uint64_t events = 0;         // events read, all processes
  const ProcessSummary* first_cut = nullptr;
  bool partial() const { return cut > 0; }
  bool nothing_read() const { return cut > 0 && events == 0; }
};
ReadExtent read_extent(const Report& r);

// The command the user ran, of a job's processes: one whose parent is not in
// the job. Among several (ranks a launcher we did not trace started; the
// workers of a multiprocessing forkserver, which records nothing itself),
// one that is not a multiprocessing helper, then the earliest to record.
// Null for no processes.
const ProcessSummary* command_process(const std::vector<ProcessSummary>& processes);

// Whether `argv` is a process Python's multiprocessing started to serve
// another (spawn's children, `-c "from multiprocessing.spawn import ..."
// --multiprocessing-fork`; the forkserver, whose workers share its argv).
bool is_multiprocessing_helper(const std::vector<std::string>& argv);

// The parts, each a pure function of the model (unit-tested on their own).
Totals copy_totals(const model::Job& job);
std::vector<ClassTotals> class_totals(const model::Job& job);
Totals memset_totals(const model::Job& job);
Allocations allocation_totals(const model::Job& job);
std::vector<ApiTotals> api_totals(const model::Job& job);
PageableShare pageable_share(const model::Job& job);
RewriteTotals rewrite_totals(const model::Job& job);
std::vector<CallSiteTotals> callsite_totals(const model::Job& job, uint64_t* calls_without_site);
// The sites (callsite_totals') by location: summed, most CPU-blocked time
// first (then most bytes), each with its main class over all its copies.
std::vector<LocationTotals> location_totals(const model::Job& job);

// A finding's sites summed by location. A site in no location (an
// allocation site of managed_migrations, copies without a site) stays as it
// is. Per location: calls, bytes, times and estimates added up; achieved_gbps
// from the sums; calls_per_second the largest of its sites' (one process's).
std::vector<FindingSite> finding_locations(const Finding& f, const std::vector<LocationTotals>& locations);

// The identity of a call site across processes and runs: a Python line as
// "py!function (file:line)"; a native frame as module base name + function
// (+ file:line), or module base name + offset when unsymbolized; never an
// address while a module holds it (ASLR).
std::string site_key(const symbolize::Frame& frame);
std::vector<Finding> find_async_pageable(const model::Job& job, const Thresholds& t);
std::vector<Finding> find_large_pageable(const model::Job& job, const Thresholds& t);
std::vector<Finding> find_tiny_storm(const model::Job& job, const Thresholds& t);
std::vector<Finding> find_rewrite_candidates(const model::Job& job, const Thresholds& t);
std::vector<Finding> find_sync_copy_idle(const model::Job& job, const Thresholds& t);
std::vector<Finding> find_duplicates_and_round_trips(const model::Job& job, const Thresholds& t);
Overlap overlap_totals(const model::Job& job);
Managed managed_totals(const model::Job& job);
std::vector<Finding> find_managed_migrations(const model::Job& job, const Managed& m, const Thresholds& t);
std::vector<DeviceTotals> device_totals(const model::Job& job);
std::vector<ProcessSummary> process_summaries(const model::Job& job);
// Every range path that held a copy, in path order (a range before its nested
// ones); empty when the job recorded no NVTX range. `findings`: the report's.
// A pass of its own (tally_calls): analyze() takes the table from its tally.
std::vector<RangeTotals> range_totals(const model::Job& job, const std::vector<Finding>& findings,
                                      const Thresholds& thresholds = {});

// "gpu" when every process that made copies had CUPTI active, else "cpu".
std::string job_timing(const model::Job& job);

// "H2D pageable", "D2D device", ...
std::string class_name(const model::TransferClass& c);

}  // namespace cuxfer::analyses
