// `cuxfer check`'s decision: a budget and a run's report in, one verdict per
// limit out. Pure (no I/O, no clock), so that every kind of violation is
// unit-tested with made-up reports; render/check_renderer lays the verdicts
// out (lines, JUnit XML) and cli/check_command reads the files.
//
// Also the reverse: a budget from a known-good run, with margins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analyses/report.h"
#include "analyzer/check/budget.h"
#include "policy/policy.h"

namespace cuxfer::check {

// The run as the check sees it: the report, and each of its call sites named
// as a budget names sites (analyses::identify_site), in report.callsites
// order; nullopt where a site cannot be named (no module, no build id).
struct CheckedRun {
  const analyses::Report* report = nullptr;
  std::vector<std::optional<policy::Site>> site_names;
};

enum class Measure : uint8_t { Bytes, Copies, PageableBytes, CpuBlocked, Finding };

struct Verdict {
  uint32_t entry = 0;  // index into Budget::entries
  Measure measure = Measure::Bytes;
  analyses::FindingKind finding = analyses::FindingKind::AsyncPageable;  // Measure::Finding
  // Bytes/copies/ns measured against the limit; for a finding, the copies it
  // counts at the entry's scope (0: absent), against a limit of 0.
  uint64_t measured = 0, limit = 0;
  std::optional<TimeLimit> time;  // Measure::CpuBlocked: the limit as stated
  bool kept = true;
};

struct CheckResult {
  std::vector<Verdict> verdicts;  // budget order, then the entry's limits in the file's field order
  // Site entries that matched no call site of the run (their limits were
  // checked against zero): a budget for another build of a native module, or
  // a script that changed, passes them silently otherwise.
  // NVTX range entries whose range held no copy of the run are listed too.
  std::vector<uint32_t> unmatched_site_entries;
  size_t violations() const;
};

// Checks every limit of `budget` against the run.
CheckResult check_budget(const Budget& budget, const CheckedRun& run);

// The one line that says why a budget does not fit the traces: the budget's
// program is not the executable of any of the run's processes. Empty when it
// fits (or the budget names no program).
std::string program_mismatch(const Budget& budget, const analyses::Report& report);

// The base name of a path ("/usr/bin/python3.12" -> "python3.12").
std::string base_name(const std::string& path);

// What --write-budget makes of a known-good run.
struct BudgetMargins {
  double bytes_percent = 0;  // added to measured bytes and copies (rounded up)
  double time_tolerance_percent = 100;  // the time limits' tolerance over the measured baseline
};

// Whether a finding is raised or not by comparing measured times (not counts
// or bytes): a written budget does not forbid it, as it gives no time limit
// without a tolerance.
bool raised_by_measured_time(analyses::FindingKind k);

// A budget the run keeps: the program, then one entry for the run (bytes,
// copies, pageable bytes, CPU-blocked time, and every finding the run does not
// raise forbidden, but those raised_by_measured_time), one per class the run has, one per NVTX range, one per call site that can be
// named (most CPU-blocked time first). Time limits only where the baseline is
// not zero.
Budget budget_from_run(const CheckedRun& run, const BudgetMargins& margins, const std::string& generator);

}  // namespace cuxfer::check
