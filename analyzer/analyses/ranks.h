// The ranks of a multi-rank job (mpirun, srun, torchrun): which rank each
// process is, read from its trace's rank note (the shim writes it from the
// launcher's variables: shim/core/rank.h, docs/trace-format.md), per-rank
// totals, and the spread across ranks: who moved the most through pageable
// memory, who was blocked the longest, max/median. Pure functions of the
// model, unit-tested (tests/unit/analyzer/ranks_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/model/job.h"

namespace cuxfer::analyses {

struct Finding;         // report.h
struct LocationTotals;  // report.h

// A trace's rank note: "rank: <R> launcher=<l> variable=<V>[ local_rank=<n>]
// [ world_size=<n>][ launch_id=<id>]"; keys it does not know are ignored.
struct RankIdentity {
  uint32_t rank = 0;
  std::optional<uint32_t> local_rank, world_size;
  std::string launcher, variable, launch_id;
};
std::optional<RankIdentity> parse_rank_note(std::string_view note);
// The first rank note of the trace; none for a process that was no rank.
std::optional<RankIdentity> rank_of(const trace::Trace& t);
// The trace's run note ("run: <id>", written when `cuxfer record` started the
// process): the same in every process of one record run. None for traces of
// a shim preloaded by hand, and of older shims.
std::optional<std::string> run_id_of(const trace::Trace& t);

struct RankClass {
  std::string cls;  // "H2D pageable"
  uint64_t calls = 0, bytes = 0, cpu_blocked_ns = 0;
};

struct RankFinding {
  std::string kind;                            // finding_kind_name
  uint64_t calls = 0, bytes = 0, time_ns = 0;  // at the rank's call sites of the finding
};

struct RankTotals {
  uint32_t rank = 0;
  std::string host;            // the rank's first process's hostname
  std::vector<uint32_t> pids;  // its processes (a rank's forks carry its rank too)
  std::string launcher;
  uint64_t copies = 0, bytes = 0, pageable_bytes = 0, cpu_blocked_ns = 0, failed_calls = 0;
  std::optional<uint64_t> gpu_ns;     // set when one of its copies had GPU time
  std::vector<RankClass> classes;     // direction x memory kind, in class order
  std::vector<RankFinding> findings;  // most time first
  std::vector<uint32_t> sites;        // the report's locations (LocationTotals::id) it copied at, ascending
};

// Across ranks. Imbalance is max / median (median of an even count: the mean
// of the middle two); absent when the median is 0.
struct RankSpread {
  uint32_t most_bytes_rank = 0;
  uint64_t most_bytes = 0;
  uint32_t most_pageable_rank = 0;  // most bytes through pageable host memory (H2D + D2H)
  uint64_t most_pageable_bytes = 0;
  uint32_t slowest_rank = 0;  // most CPU-blocked time in copies
  uint64_t slowest_cpu_blocked_ns = 0;
  std::optional<double> bytes_imbalance, pageable_imbalance, cpu_blocked_imbalance;
};

struct Ranks {
  std::vector<RankTotals> ranks;    // in rank order; empty unless the job has two ranks or more
  uint32_t unranked_processes = 0;  // processes of such a job without a rank (a launcher that copied)
  std::optional<RankSpread> spread;
};

// `findings`: the report's (their call sites tell whose they are);
// `locations`: the report's, for each rank's `sites`.
Ranks rank_totals(const model::Job& job, const std::vector<Finding>& findings,
                  const std::vector<LocationTotals>& locations);
Ranks rank_totals(const model::Job& job, const std::vector<Finding>& findings);  // no sites
RankSpread rank_spread(const std::vector<RankTotals>& ranks);                    // ranks not empty

// --- Many ranks at a glance (the text report's layout above kPerRankLayoutMax
// ranks; docs/report.md, "Multi-rank jobs") ---

// Up to this many ranks (or processes) the text shows one line each; above,
// the distribution, the outliers and the patterns instead (--json keeps
// every rank).
inline constexpr size_t kPerRankLayoutMax = 8;

// min, median, 95th percentile, max of one number over ranks (or processes);
// `*_id` the rank (pid) of the min and the max, the lowest on a tie. Median of
// an even count: the mean of the middle two, rounded down; p95: the nearest
// rank (the value at ceil(0.95 n)).
struct Distribution {
  uint64_t min = 0, median = 0, p95 = 0, max = 0;
  uint32_t min_id = 0, max_id = 0;
};
// (value, id) pairs, in any order; all zero when empty.
Distribution distribution_of(std::vector<std::pair<uint64_t, uint32_t>> values);

// A rank whose number is more than twice the median or less than half of it
// (or not 0 where the median is 0), and why: the class that moved it most
// from the median rank, and the findings whose time there is over twice their
// median over the ranks that have them.
struct RankOutlier {
  uint32_t rank = 0;
  std::string metric;  // "copies" | "bytes" | "pageable" | "CPU-blocked"
  uint64_t value = 0, median = 0;
  std::string cls;  // the class whose value differs most from its median; "" when none does
  uint64_t cls_value = 0, cls_median = 0;
  std::vector<std::string> findings;  // finding kinds, most time first
};

// Ranks with the same call sites, classes and findings.
struct RankPattern {
  std::vector<uint32_t> ranks;  // ascending
  std::vector<uint32_t> sites;  // locations (LocationTotals::id), ascending
  std::vector<std::string> classes, findings;
};

// A call site or a finding over the ranks: in how many, and which when few.
struct AcrossRanks {
  uint32_t site = 0;                // a location id (sites), or 0
  std::string finding;              // a finding kind (findings), or ""
  std::vector<uint32_t> ranks;      // ascending
  uint64_t calls = 0, time_ns = 0;  // summed over them (findings)
  Distribution time_per_rank;       // findings: over the ranks that have it
};

struct RankDigest {
  Distribution copies, bytes, pageable, cpu_blocked;
  std::optional<Distribution> gpu;    // when some rank has GPU time
  std::vector<RankOutlier> outliers;  // farthest from the median first (ratio either way)
  std::vector<RankPattern> patterns;  // most ranks first; a tie: lowest rank first
  std::vector<AcrossRanks> sites;     // in the order of the locations' ids
  std::vector<AcrossRanks> findings;  // most ranks first, then most time
};
RankDigest digest_ranks(const std::vector<RankTotals>& ranks);

// One line naming two traces that cannot be one run, or none (the rule is in
// docs/report.md, "Multi-rank jobs"): among the traces that carry a rank,
//   - two with different launch ids;
//   - two of the same rank where neither process descends from the other;
//   - two of different programs that started more than 60 s apart.
std::optional<std::string> mixed_runs(const model::Job& job);

// Two traces whose run notes differ (two `cuxfer record`s, neither pair both
// ranks): read together they are one job's numbers, which the user may want
// (two runs exported into one database) or not (two runs left in one folder).
// The commands say so in their first line and go on; "" when not so.
std::optional<std::string> separate_recordings(const model::Job& job);

}  // namespace cuxfer::analyses
