// Unified (managed) memory a process at a time, fed as its trace is read
// (managed.cpp): its managed allocations as their calls are made, its
// unified-memory records as their blocks come. managed_totals and
// find_managed_migrations (report.h) feed a whole job's through the same
// code, every allocation first; a streamed report (stream.h) feeds them in
// file order and keeps the result in its tally (JobTally::managed).
//
// Memory: the allocations (few: one per cudaMallocManaged) and, per
// allocation site, the on-demand intervals merged as they come (disjoint
// spans of time, at most kKeptIntervals of them; older ones are settled into
// a sum), never the records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/analyses/report.h"
#include "analyzer/model/job.h"
#include "trace/event.h"

namespace cuxfer::analyses {

// The length of a union of time intervals, merged as they are added. Past
// `max_kept` disjoint intervals the earliest are settled into a sum and
// forgotten: an interval that starts before the end of a settled one can no
// longer be merged exactly, and add() says so.
class IntervalUnion {
 public:
  // False (nothing added) when [begin, end) starts before the settled part ends.
  bool add(uint64_t begin, uint64_t end, size_t max_kept = SIZE_MAX);
  uint64_t length() const;
  size_t kept() const { return spans_.size(); }
  // A union known only by its length (a job summary keeps no intervals: a
  // site's are all of one process, merged before the summary is written).
  // Nothing can be added to it.
  static IntervalUnion of_length(uint64_t length);

 private:
  std::map<uint64_t, uint64_t> spans_;  // begin -> end, disjoint, not touching
  uint64_t settled_ = 0;                // the length of the settled spans
  uint64_t floor_ = 0;                  // every settled span ends at or before it
};

// One allocation site's unified memory (of one process).
struct ManagedSiteTally {
  ManagedTotals totals;  // pid, frame and on_demand_ns are set from the job at the end
  uint64_t on_demand_htod = 0, on_demand_dtoh = 0;
  uint64_t largest_allocation = 0;
  IntervalUnion on_demand;  // migrations and GPU fault groups served on demand
};

// (Job::processes index, call-site id: Job::sites index + 1, 0 unknown) -> its unified memory.
using ManagedTally = std::map<std::pair<uint32_t, uint32_t>, ManagedSiteTally>;

// The unified memory of one process, fed in trace order. Each record goes to
// the managed allocation whose range held its address when it started (the
// latest such; managed.cpp's AllocIndex says exactly which), among the
// allocations fed so far. An allocation fed after a record it would have
// taken (its call written after the CUPTI buffer that held the record)
// makes the feed inexact: the result would not be the whole job's.
class ManagedFeed {
 public:
  // On-demand intervals kept per site before the earliest are settled: a
  // record that starts before the settled ones end makes the feed inexact.
  static constexpr size_t kKeptIntervals = size_t{1} << 12;

  // `process`: the key's process in the tally; `max_kept`: kKeptIntervals,
  // or SIZE_MAX where nothing bounds the memory anyway (the whole job).
  explicit ManagedFeed(uint32_t process, size_t max_kept = kKeptIntervals);
  ~ManagedFeed();
  ManagedFeed(ManagedFeed&&) noexcept;
  ManagedFeed& operator=(ManagedFeed&&) noexcept;

  // The managed allocations among `calls` (model::Call::site: the job's, or
  // the process's own sites numbered from 0 in a streamed process).
  void add_calls(std::span<const model::Call> calls);
  // The unified-memory records among `records` (others are passed by).
  void add_records(std::span<const trace::GpuRecord> records);
  // Nullopt while exact; else why not, in words.
  const std::optional<std::string>& inexact() const { return inexact_; }
  // The sites fed (into `into`, keyed by this feed's process).
  void take(ManagedTally& into);

 private:
  class Allocations;
  uint32_t process_;
  size_t max_kept_;
  std::unique_ptr<Allocations> allocations_;
  ManagedTally sites_;
  std::optional<std::string> inexact_;
};

// The unified memory of a job that holds its events: each process's
// allocations fed first, then its records (no bound on the intervals kept).
ManagedTally managed_tally(const model::Job& job);

// The report's managed memory part and its finding from a job's tally (the
// job: its processes' notes and call sites).
Managed managed_of(const model::Job& job, const ManagedTally& tally);
std::vector<Finding> managed_migration_findings(const model::Job& job, const ManagedTally& tally,
                                                const Managed& m, const Thresholds& t);

}  // namespace cuxfer::analyses
