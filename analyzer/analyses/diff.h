// `cuxfer diff`: two runs of the same workload (e.g. without and with
// `--rewrite=pin`) compared call site by call site. Pure functions over two
// Jobs; bytes and nanoseconds are exact integers. Call sites are matched by
// their symbolized identity (module base name + function + file:line, or
// module base name + offset when unsymbolized), never by address (ASLR).
//
// Each side may be several runs of its workload: a side's numbers are then
// the medians over its runs, and the time recovered comes with how far it
// stands from run-to-run noise (TimeRecoveredNoise). One run each gives a
// difference that no one can tell from noise, and the diff says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analyses/report.h"  // site_key: the identity sites are matched by
#include "analyzer/model/job.h"
#include "analyzer/analyses/tally.h"

namespace cuxfer::analyses {

// Copies of one transfer class (direction x host memory kind) in one run.
struct DiffClassCount {
  model::TransferClass cls;
  uint64_t calls = 0, bytes = 0;
  friend bool operator==(const DiffClassCount&, const DiffClassCount&) = default;
};

// What one run did at one call site (or in total). Successful copies only.
struct DiffSide {
  uint64_t calls = 0;
  uint64_t copy_bytes = 0;    // bytes the app asked to move (DMA)
  uint64_t staged_calls = 0;  // of calls: staged through the rewrite's pinned pool
  uint64_t staged_bytes = 0;  // bytes cuxfer copied once more on the CPU (staging)
  uint64_t cpu_blocked_ns = 0;
  std::optional<uint64_t> gpu_ns;  // set when some copy had GPU time
  uint64_t failed_calls = 0;
  std::vector<DiffClassCount> classes;  // sorted by (direction, memory)
};

struct DiffSite {
  std::string key;      // the identity both runs are matched by
  std::string display;  // for people: "function (file:line)" or "module+0xoff"
  std::string label;    // for narrow columns: "load_batch (load.cpp:42)"
  bool in_base = false, in_new = false;
  DiffSide base, now;  // "now" is the NEW run
  bool same_work = true;  // same copy counts and bytes per class in both runs
  std::string difference;  // when !same_work: what differs, one line
  // base - new CPU-blocked time: measured, not estimated.
  int64_t time_recovered_ns() const {
    return static_cast<int64_t>(base.cpu_blocked_ns) - static_cast<int64_t>(now.cpu_blocked_ns);
  }
};

// One run of a side, as measured.
struct DiffRunSample {
  std::vector<std::string> traces;
  uint64_t cpu_blocked_ns = 0, wall_ns = 0;
};

// One side: one run or several. With several, every number here is the
// median over the runs (the mean of the middle two for an even count), each
// field on its own; `samples` has each run's own.
struct DiffRun {
  std::vector<std::string> traces;  // paths of every run, for the header
  uint32_t runs = 1;
  uint32_t processes = 0;
  uint64_t wall_ns = 0;  // first process start to the last recorded call's end
  bool rewrite = false;  // some process ran with the pinned rewrite on
  bool simulated = false;  // some process ran on the simulated CUDA (tests/simcuda): its times mean nothing
  DiffSide totals;
  std::vector<DiffRunSample> samples;
  // When the side's runs did not all do the same work: the first difference
  // found ("run 3 (PATH): SITE: H2D pageable: 8 calls/... -> ..."); empty otherwise.
  std::string work_spread;
};

// How far the time recovered stands from run-to-run noise.
enum class NoiseVerdict : uint8_t {
  OneRunEach,     // one run per side: nothing says how much runs vary
  Beyond,         // every pair differs the same way, which runs that do not differ rarely do (<= 5 %)
  NotConclusive,  // every pair differs the same way, but with so few runs that happens by chance too often
  Within,         // the runs overlap: some pair differs the other way (or not at all)
};

// Every base run against every new run (m x n pairs of CPU-blocked times):
// the range of their differences, and whether they all have one sign. Such a
// separation happens among runs that do not differ at all with probability
// 2 / C(m+n, m) (the exact two-sided permutation test, whose most extreme
// outcome it is: a Mann-Whitney U of 0 or m*n); the difference is taken as
// beyond noise when separated with that chance at most kNoiseAlpha.
inline constexpr double kNoiseAlpha = 0.05;
struct TimeRecoveredNoise {
  NoiseVerdict verdict = NoiseVerdict::OneRunEach;
  int64_t pairs_min_ns = 0, pairs_max_ns = 0;  // smallest and largest base-minus-new difference of a pair
  bool separated = false;
  double chance = 1;  // 2 / C(m+n, m)
  // Runs of each side with which a separation is beyond noise (chance <= kNoiseAlpha).
  uint32_t runs_for_separation = 0;
};

struct Diff {
  std::string schema = "cuxfer.diff/1";
  DiffRun base, now;
  std::vector<DiffSite> sites;  // matched sites first (most time recovered first), then one-run sites
  bool same_work = true;        // every site in both sides did the same work, and each side's runs did
  TimeRecoveredNoise noise;
  std::vector<std::string> notes;
  // Median base minus median new CPU-blocked time.
  int64_t time_recovered_ns() const {
    return static_cast<int64_t>(base.totals.cpu_blocked_ns) - static_cast<int64_t>(now.totals.cpu_blocked_ns);
  }
};

// The comparison of two jobs, site by site_key() (report.h); copies without a
// captured call site are one site, "(no call site)".
Diff diff_jobs(const model::Job& base, const model::Job& now);

// The same over several runs per side (each at least one): per side, every
// number is the median over its runs; `noise` compares the runs pairwise.
Diff diff_runs(const std::vector<const model::Job*>& base, const std::vector<const model::Job*>& now);

// One run: its job, and for a run read from job summaries (analyses/summary.h:
// a job without calls) the merged tally the comparison is made from. The
// numbers are the same as the traces' (the tally holds per site and per
// process what the calls would give).
struct DiffInput {
  const model::Job* job = nullptr;
  const JobTally* tally = nullptr;
};
Diff diff_inputs(const std::vector<DiffInput>& base, const std::vector<DiffInput>& now);

// The noise judgement of CPU-blocked times, m base runs against n new runs.
TimeRecoveredNoise judge_noise(const std::vector<uint64_t>& base_ns, const std::vector<uint64_t>& now_ns);

// One line: how two sides' per-class work differs; empty when it does not.
std::string work_difference(const DiffSide& base, const DiffSide& now);

}  // namespace cuxfer::analyses
