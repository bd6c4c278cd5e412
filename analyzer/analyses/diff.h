// `cuxfer diff`: two runs of the same workload (e.g. without and with
// `--rewrite=pin`) compared call site by call site. Pure functions over two
// Jobs; bytes and nanoseconds are exact integers. Call sites are matched by
// their symbolized identity (module base name + function + file:line, or
// module base name + offset when unsymbolized), never by address (ASLR).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analyses/report.h"  // site_key: the identity sites are matched by
#include "analyzer/model/job.h"

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

struct DiffRun {
  std::vector<std::string> traces;  // paths, for the header
  uint32_t processes = 0;
  uint64_t wall_ns = 0;  // first process start to the last recorded call's end
  bool rewrite = false;  // some process ran with the pinned rewrite on
  DiffSide totals;
};

struct Diff {
  std::string schema = "cuxfer.diff/1";
  DiffRun base, now;
  std::vector<DiffSite> sites;  // matched sites first (most time recovered first), then one-run sites
  bool same_work = true;        // every site in both runs did the same work
  std::vector<std::string> notes;
  int64_t time_recovered_ns() const {
    return static_cast<int64_t>(base.totals.cpu_blocked_ns) - static_cast<int64_t>(now.totals.cpu_blocked_ns);
  }
};

// The comparison of two jobs, site by site_key() (report.h); copies without a
// captured call site are one site, "(no call site)".
Diff diff_jobs(const model::Job& base, const model::Job& now);

// One line: how two sides' per-class work differs; empty when it does not.
std::string work_difference(const DiffSide& base, const DiffSide& now);

}  // namespace cuxfer::analyses
