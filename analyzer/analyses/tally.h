// One pass over the job's calls that gathers what every table and finding of
// the report needs. A trace holds millions of calls and each pass over them
// reads a Call and its Event (two cache lines) from memory that no cache
// holds: doing it once instead of once per table is most of the analyzer's
// speed (docs/benchmarks.md, "Analyzer throughput"). The per-call steps are
// inline here so that the loop in tally_calls() is one tight body; the
// pure functions of report.h turn a tally into the report's parts.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analyzer/analyses/managed.h"
#include "analyzer/analyses/report.h"

namespace cuxfer::analyses {

// Direction x memory kind as one small index: classify() bounds both.
inline constexpr unsigned kDirections = static_cast<unsigned>(trace::Direction::Peer) + 1;
inline constexpr unsigned kMemKinds = static_cast<unsigned>(trace::MemKind::Array) + 1;
inline constexpr unsigned kClasses = kDirections * kMemKinds;
static_assert(kClasses <= 64, "class sets are 64-bit masks");

inline unsigned class_index(const model::TransferClass& c) {
  return static_cast<unsigned>(c.direction) * kMemKinds + static_cast<unsigned>(c.memory);
}
inline model::TransferClass class_of_index(unsigned i) {
  return {static_cast<trace::Direction>(i / kMemKinds), static_cast<trace::MemKind>(i % kMemKinds)};
}

// Pageable copies the rewrite left as made, per recorded reason and
// direction: index trace::PassthroughReason (kPassthroughReasons: a value
// this build does not know), then 0 H2D, 1 D2H.
struct ReasonCount {
  uint64_t calls = 0, bytes = 0;
};
inline constexpr size_t kReasonSlots = trace::kPassthroughReasons + 1;
using ReasonCounts = std::array<std::array<ReasonCount, 2>, kReasonSlots>;

// Per job site (callsite_totals), and per process its copies without a site.
struct SiteTally {
  bool used = false;
  CallSiteTotals out;  // numbers only until finished
  uint64_t classes_seen = 0;  // bit class_index(): a successful copy of that class
  std::array<uint64_t, kClasses> class_bytes{};
  // What `cuxfer diff` compares per site, for a diff of summaries: the
  // successful copies per class, and those the rewrite staged.
  std::array<uint64_t, kClasses> class_calls{};
  uint64_t staged_calls = 0, staged_bytes = 0;
};

// Per process: copies for the summary and the timing, the rewrite's copies,
// and the end of the last call for the job's span.
struct ProcessTally {
  bool has_copies = false;  // any copy, failed ones included
  uint64_t copies = 0, bytes = 0, cpu_blocked_ns = 0, failed_copies = 0;
  bool rewrote = false;  // a staged or registered copy
  uint64_t staged_calls = 0, staged_bytes = 0, registered_calls = 0, registered_bytes = 0;
  // The staged copies' time in the app's calls, and what decides their cost
  // from memory pinned at the source: async calls (they would return once
  // queued) and the synchronous ones' bytes and calls per direction (0 H2D, 1 D2H).
  uint64_t staged_cpu_ns = 0, staged_async_calls = 0;
  uint64_t staged_sync_bytes[2] = {0, 0}, staged_sync_calls[2] = {0, 0};
  uint64_t passthrough_pageable_calls = 0, passthrough_pageable_bytes = 0;
  ReasonCounts passthrough_reasons{};  // the passthrough pageable copies, per reason
  uint64_t zero_copy_calls = 0, zero_copy_bytes = 0;  // a side is a zero-copy (mapped) buffer
  uint64_t last_end_realtime_ns = 0;  // max Process::realtime_of(t_exit) over its calls
  SiteTally no_site;  // its copies without a call site, as a site of their own (for diff)
  std::vector<ApiTotals> apis;        // by API index; names filled in when merged
  // For the Ranks table (rank_totals): the successful copies per class, their
  // pageable bytes and GPU time. Kept per process so that a summary carries
  // them (analyses/summary.h) and the table needs no pass over the calls.
  struct ClassCount {
    uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0;
  };
  std::array<ClassCount, kClasses> classes{};
  uint64_t pageable_bytes = 0, gpu_ns = 0;
  bool has_gpu = false;
  // The shim's own work in this process (rewrite_totals): in-place
  // registrations, the staging pool, zero-copy allocations. `shim_rewrite`:
  // one of the first two was seen (the rewrite was on here).
  bool shim_rewrite = false;
  uint64_t registrations = 0, registration_bytes = 0, registration_cost_ns = 0, registrations_refused = 0;
  uint64_t pool_allocations = 0, pool_bytes = 0, pinning_cost_ns = 0;
  uint64_t zero_copy_allocations = 0, zero_copy_allocation_bytes = 0;
  // For the note on copies without a Python line (copies_without_python_note),
  // counted where the process's call sites hold a Python frame
  // (`python_sites`: Python ran there): its copies with a call site, failed
  // ones included, and of them those whose site holds no Python frame, their
  // bytes and the distinct threads that made them (the ids while the pass
  // runs; their number from finish_tally, or from a summary). Per process, so
  // that a summary carries them and the streamed report merges them.
  // `python_lines_known` is false for a process of a summary written before
  // they were counted, whose sites hold a Python frame: its counts are unknown.
  bool python_sites = false;
  bool python_lines_known = true;
  uint64_t python_site_copies = 0, copies_without_python = 0, bytes_without_python = 0;
  uint64_t threads_without_python = 0;
  std::unordered_set<uint32_t> thread_ids_without_python;
};

// Per transfer class (class_totals).
struct ClassTally {
  bool seen = false;
  ClassTotals out;
  uint64_t gpu_ns = 0, cpu_measured_bytes = 0, cpu_measured_ns = 0;
};

// Inputs of the findings (findings.cpp). The async_pageable and
// large_pageable estimates depend on figures measured over the whole run, so
// their qualifying copies are kept in compact form and finished afterwards.
struct AsyncPageableCopy {
  uint32_t site_id;  // Job::sites index + 1, 0 = none
  uint8_t dir;       // 0 H2D, 1 D2H
  uint64_t bytes, cpu_ns;
};
struct LargePageableCopy {
  uint32_t site_id;
  uint8_t dir;
  bool gpu;       // time is GPU time
  uint64_t bytes;
  uint64_t time;  // GPU time when the copy has it, else CPU-blocked time
};
struct StormSite {
  uint64_t calls = 0, bytes = 0, time_ns = 0, max_ns = 0;
  uint64_t first_enter = UINT64_MAX, last_enter = 0;
};
struct FindingsTally {
  std::vector<uint64_t> pinned_async_return_ns[2];  // per direction
  // The same times as an exact histogram (value -> how many), where a summary
  // brought them (analyses/summary.h): a job's median is taken over both, and
  // the histogram's size is its distinct values, not its copies.
  std::map<uint64_t, uint64_t> pinned_async_return_histogram[2];
  uint64_t pinned_large_bytes[2] = {0, 0}, pinned_large_ns[2] = {0, 0};
  std::vector<AsyncPageableCopy> async_pageable;
  std::vector<LargePageableCopy> large_pageable;
  // How many copies each entry above stands for: empty after a pass over
  // calls (one each); a summary stores equal copies once (analyses/summary.h).
  // Apart from the entries, which stay 24 and 32 bytes in the pass.
  std::vector<uint64_t> async_pageable_counts, large_pageable_counts;
  uint64_t async_count(size_t i) const { return async_pageable_counts.empty() ? 1 : async_pageable_counts[i]; }
  uint64_t large_count(size_t i) const { return large_pageable_counts.empty() ? 1 : large_pageable_counts[i]; }
  std::vector<StormSite> storm;  // by site id (index 0 unused: storms need a site)
  // Where the references were known before the pass (Thresholds::known),
  // the async_pageable and large_pageable copies summed per site id instead
  // of listed (empty otherwise): memory that does not grow with the copies.
  struct SiteSum {
    uint64_t calls = 0, bytes = 0, time_ns = 0, max_ns = 0, recoverable_ns = 0;
  };
  std::vector<SiteSum> async_sites, large_sites;
  bool async_measured = false;  // a summed copy's reference was measured in the run
  bool large_used_measured = false, large_used_nominal = false;
  double large_ref_max = 0;  // the largest reference of a summed copy
  uint64_t large_gpu_calls = 0;
  // duplicate_uploads and round_trips of a streamed report or a summary: the
  // copies that repeat, summed per site id (duplicates.h, add_repeated_copies)
  // as each process ends. Empty in a report holding the events (it walks the
  // job's copies itself).
  std::vector<SiteSum> duplicate_sites, round_trip_sites;
  // sync_copy_idle: the synchronous copies between their device's first and
  // last kernel that left it idle, summed per site id (overlap.h); on every
  // path, and in a summary.
  std::vector<SiteSum> sync_idle_sites;
};

// Copy/compute overlap (overlap.h): per process and device, in process then
// device order, as the Overlap table lists them.
struct OverlapTally {
  bool kernels_recorded = false;  // some process recorded kernels (its trace's note)
  std::vector<DeviceOverlap> devices;
};
// Sum one qualifying copy into FindingsTally::async_sites / large_sites with
// the known references (findings.cpp; the same arithmetic as for a listed copy).
void add_summed_async(FindingsTally& f, const AsyncPageableCopy& c, const Thresholds& t);
void add_summed_large(FindingsTally& f, const LargePageableCopy& c, const Thresholds& t);
// The run's references from the pass's (or summaries') pinned copies.
Thresholds::RunReferences run_references(const FindingsTally& f);

// Rewrite what-if (finding "rewrite_candidates", rewrite_whatif.cpp). Its
// own pass kept a hash map of every buffer's copies; here each pageable
// H2D/D2H copy goes through add_rewrite_copy() during the one pass, which
// adds its prediction to running sums and per-site slots. Only "copied
// before" is needed of a buffer (a copy seen before means the buffer is
// copied at least twice), so a set of the buffers seen so far replaces the
// earlier count-then-replay passes.
class BufferSet {  // (process, host address, bytes) seen so far
 public:
  // Adds the buffer; false when it was already there.
  bool insert(uint32_t process, uint64_t address, uint64_t bytes);

 private:
  void grow();
  struct Slot {
    uint64_t address = 0, bytes = 0;
    uint32_t process = 0;
    bool used = false;
  };
  std::vector<Slot> slots_;  // open addressing, power-of-two size, at most half full
  size_t size_ = 0;
};
struct RewriteSite {  // by site id (Job::sites index + 1, 0 = none)
  uint64_t calls = 0, bytes = 0, time_ns = 0, max_ns = 0, recoverable_ns = 0;
};
struct RewriteTally {
  // Set once before the pass (start_rewrite_whatif).
  std::vector<uint8_t> on;  // per process: recorded with the rewrite (its note): nothing to predict
  const model::MachineProfile* profile = nullptr;
  uint32_t threads = 8;
  uint64_t stage_min[2] = {0, 0}, register_min = 0;
  double nominal_pinned_gbps = 0;
  // Gathered by the pass.
  BufferSet seen;
  uint64_t calls = 0, bytes = 0, time_ns = 0, max_ns = 0, gpu_calls = 0, predicted_ns = 0, largest = 0;
  uint64_t registered = 0, staged = 0;
  std::vector<RewriteSite> sites;
};
void start_rewrite_whatif(RewriteTally& r, const model::Job& job, const Thresholds& t);
// A successful pageable H2D/D2H copy (the tally filters; out of line, as only
// those copies pay for the call); `measured_by_cpu`:
// model::cpu_time_measures_transfer() of it.
void add_rewrite_copy(RewriteTally& r, const model::Call& c, bool measured_by_cpu);

// Per process and device (device_totals, devices.cpp). Its own pass looked
// up a std::map; here a flat slot per (process, device) and a cached pointer,
// as consecutive copies nearly always share both.
struct DeviceAcc {
  DeviceTotals out;  // out.calls == 0: no copy there; per-direction bytes are in dir_bytes
  std::array<uint64_t, kDirections> dir_bytes{};  // indexed, not switched on: no branch per copy
  uint64_t gpu_ns = 0;
  bool gpu = false;
};
struct DeviceTally {
  static constexpr int kOffset = 128;  // Event::device is an int8_t: slot device + 128
  std::vector<std::vector<DeviceAcc>> by_process;
  // (process, source device, destination device) -> peer copies; rare, so a map.
  std::map<std::tuple<uint32_t, int, int>, PeerPair> peers;
  uint32_t last_process = UINT32_MAX;
  int last_device = 0;
  DeviceAcc* cur = nullptr;
};
// A successful peer copy (devices.cpp).
void add_peer_copy(DeviceTally& t, const model::Call& c);
// A successful copy.
inline void add_device_copy(DeviceTally& t, const model::Call& c) {
  const int device = c.event->device;
  if (!t.cur || c.process != t.last_process || device != t.last_device) {
    std::vector<DeviceAcc>& slots = t.by_process[c.process];
    const size_t i = static_cast<size_t>(device + DeviceTally::kOffset);
    if (i >= slots.size()) slots.resize(i + 1);
    t.cur = &slots[i];
    t.last_process = c.process;
    t.last_device = device;
  }
  DeviceAcc& a = *t.cur;
  DeviceTotals& d = a.out;
  const uint64_t bytes = c.bytes();
  ++d.calls;
  d.bytes += bytes;
  d.cpu_blocked_ns += c.cpu_ns();
  if (c.has_gpu_time()) {
    a.gpu = true;
    a.gpu_ns += c.gpu_ns;
  }
  a.dir_bytes[static_cast<unsigned>(c.cls.direction)] += bytes;  // classify() bounds it
  d.pageable_bytes += model::crosses_host_link(c.cls.direction) && model::is_pageable(c.cls) ? bytes : 0;
  if (c.cls.direction == trace::Direction::Peer) add_peer_copy(t, c);
}

// Copies per NVTX range stack, call site and class (range_totals, ranges.cpp),
// with what each finding's predicate needs to count the copies it covers
// (ranges.cpp, copies_covered: pageable is the class's; async, at least
// Thresholds::large_bytes and at most tiny_bytes are counted in the pass,
// with the thresholds the tally is made with). Bounded by stacks x sites x classes, never by the copies, so
// that a streamed report keeps it and merges it as the sites are merged.
struct RangeCopies {
  uint64_t failed_calls = 0;
  // The successful ones: their bytes, CPU-blocked and GPU time.
  uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0, gpu_ns = 0, gpu_calls = 0;
  // Of `calls`: async, at least Thresholds::large_bytes, at most tiny_bytes.
  uint64_t async_calls = 0, large_calls = 0, tiny_calls = 0;
};
struct RangeKey {
  uint32_t range = model::kNoRange;  // Job::ranges index
  uint32_t site = model::kNoSite;    // Job::sites index
  uint32_t cls = 0;                  // class_index()
  bool operator==(const RangeKey&) const = default;
  bool operator<(const RangeKey& o) const {
    return std::tie(range, site, cls) < std::tie(o.range, o.site, o.cls);
  }
};
struct RangeKeyHash {
  size_t operator()(const RangeKey& k) const {
    return std::hash<uint64_t>()((uint64_t{k.range} << 32 | k.site) * 0x9E3779B97F4A7C15ull + k.cls);
  }
};
using RangeTally = std::unordered_map<RangeKey, RangeCopies, RangeKeyHash>;

struct JobTally {
  Totals copies, memsets;
  Allocations allocations;
  PageableShare pageable;
  std::array<ClassTally, kClasses> classes{};
  std::vector<ProcessTally> processes;  // by Job::processes index
  std::vector<SiteTally> sites;         // by Job::sites index
  uint64_t calls_without_site = 0;      // copies with no call site
  std::vector<uint8_t> python_site;     // by Job::sites index: its stack holds a Python frame
  FindingsTally findings;
  RewriteTally rewrite;
  DeviceTally devices;
  RangeTally ranges;  // empty without NVTX ranges
  // Unified memory per process and allocation site: a streamed job's or a
  // summary's (a job that holds its events computes it from them; none in a
  // job of summaries written before they kept it).
  std::optional<ManagedTally> managed;
  OverlapTally overlap;
};

// The one pass (totals.cpp).
JobTally tally_calls(const model::Job& job, const Thresholds& t);
// The same in steps, for calls made a block at a time (analyses/stream.h):
// a tally sized for the job, the calls and the shim's own calls added (in
// trace order), the shares computed. `call_ranges`: per call, its NVTX range
// stack (Job::call_ranges' entries), or empty where no range was recorded.
JobTally start_tally(const model::Job& job, const Thresholds& t);
void tally_more(JobTally& tally, const model::Job& job, std::span<const model::Call> calls,
                std::span<const model::Call> shim_calls, const Thresholds& t,
                std::span<const uint32_t> call_ranges = {});
void finish_tally(JobTally& tally);
// Only the references of the calls (FindingsTally's pinned_* fields): the
// pass a streamed report makes before the tally's (Thresholds::known).
void tally_references(FindingsTally& f, std::span<const model::Call> calls, const Thresholds& t);

// The report from a tally. `events`: the job holds its calls (a job made from
// summaries, or streamed, holds none): managed memory then, or from the
// tally's (JobTally::managed: a streamed job's or a summary's). duplicate_uploads
// and round_trips come from the job's copies then, and from the tally's sums
// otherwise (FindingsTally::duplicate_sites: a streamed job's or a summary's).
// Overlap and sync_copy_idle come from the tally's sums on every path
// (JobTally::overlap, FindingsTally::sync_idle_sites).
Report analyze_tally(const model::Job& job, JobTally& tally, const Thresholds& thresholds, bool events);
// One line when processes whose call sites hold Python frames made copies
// whose sites have none (python_threads.cpp): how many, their bytes, on how
// many threads, and why (threads that ran no Python code); or, where a
// summary made before these were counted holds such a process, that they are
// unknown. From the tally's per-process counts (ProcessTally), so that a
// report of traces, streamed or not, and of summaries say the same.
std::optional<std::string> copies_without_python_note(const JobTally& tally);
// Every range path that held a copy, in path order (a range before its
// nested ones), from the tally's RangeTally; empty without NVTX ranges.
// `findings`: the report's.
std::vector<RangeTotals> range_totals(const model::Job& job, const JobTally& tally,
                                      const std::vector<Finding>& findings);
// The Ranks table from the per-process tallies (ranks.cpp).
Ranks rank_totals(const model::Job& job, const JobTally& tally, const std::vector<Finding>& findings,
                  const std::vector<LocationTotals>& locations);

// The report's parts from a tally: totals.cpp, callsites.cpp, findings.cpp,
// rewrite_whatif.cpp, devices.cpp.
std::vector<ClassTotals> class_totals(const JobTally& tally);
std::vector<ApiTotals> api_totals(const model::Job& job, const JobTally& tally);
RewriteTotals rewrite_totals(const model::Job& job, const JobTally& tally);
// The passthrough pageable copies of the processes that ran the rewrite
// (`on`, per process), per reason, most bytes first (passthrough_reasons.cpp).
std::vector<PassthroughReasonTotals> passthrough_reasons(const model::Job& job, const JobTally& tally,
                                                         const std::vector<bool>& on);
std::vector<ProcessSummary> process_summaries(const model::Job& job, const JobTally& tally);
std::string job_timing(const model::Job& job, const JobTally& tally);
std::vector<CallSiteTotals> callsite_totals(const model::Job& job, JobTally& tally);
// `sites`: callsite_totals' from the same tally (their classes' bytes are the tally's).
std::vector<LocationTotals> location_totals(const std::vector<CallSiteTotals>& sites, const JobTally& tally);
std::vector<Finding> find_async_pageable(const JobTally& tally, const Thresholds& t);
std::vector<Finding> find_large_pageable(const JobTally& tally, const Thresholds& t);
std::vector<Finding> find_tiny_storm(const JobTally& tally, const Thresholds& t);
std::vector<Finding> find_rewrite_candidates(const JobTally& tally, const Thresholds& t);  // rewrite_whatif.cpp
std::vector<DeviceTotals> device_totals(const model::Job& job, const JobTally& tally);   // devices.cpp
std::vector<PeerPair> peer_pairs(const model::Job& job, const JobTally& tally);         // devices.cpp

}  // namespace cuxfer::analyses
