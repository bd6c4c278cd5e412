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

struct Finding;  // report.h

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
  uint64_t calls = 0, bytes = 0;
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

// `findings`: the report's (their call sites tell whose they are).
Ranks rank_totals(const model::Job& job, const std::vector<Finding>& findings);
RankSpread rank_spread(const std::vector<RankTotals>& ranks);  // ranks not empty

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
