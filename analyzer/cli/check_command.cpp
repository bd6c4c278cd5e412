#include "analyzer/cli/check_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "analyzer/analyses/policy_candidates.h"
#include "analyzer/analyses/report.h"
#include "analyzer/analyses/summary.h"
#include "analyzer/analyses/tally.h"
#include "analyzer/check/verdicts.h"
#include "analyzer/cli/options.h"
#include "analyzer/cli/summary_inputs.h"
#include "analyzer/cli/trace_inputs.h"
#include "analyzer/model/job.h"
#include "analyzer/render/check_renderer.h"

namespace cuxfer::cli {

const char* const kCheckHelp =
    R"(Usage: cuxfer check --budget FILE [options] TRACE...
       cuxfer check --write-budget FILE [--margin PCT] [--time-tolerance PCT] TRACE...

Checks a run's host<->device memory movement against a budget file
(docs/check.md): bytes and copies per direction and host memory kind, total
pageable bytes, per call site (native or Python), CPU-blocked time, and
findings that must not appear. Prints one line per violation (what, where,
measured, limit). A directory stands for the cuxfer-*.trace files in it.

Byte and copy limits are exact; time limits are a baseline and a tolerance,
because timings are noisy. Job summaries (cuxfer summarize) may stand for
traces. Where a summary written before summaries kept them is given,
duplicate_uploads and round_trips, managed_migrations, or sync_copy_idle (of
a process that recorded kernels) are not checked, and one line says so; an
NVTX range entry then needs the traces (exit 2).

Options:
  --budget FILE        the budget to check the traces against
  --junit FILE         also write the verdicts as JUnit XML (one test case per
                       budget entry) for CI
  --any-program        apply a budget written for another program (by default
                       refused, exit 2)
  --write-budget FILE  write a budget that the traces keep, instead of checking
  --margin PCT         with --write-budget: added to the measured bytes and
                       copies (default 0: exact, a deterministic program moves
                       the same bytes every run)
  --time-tolerance PCT with --write-budget: how far above the measured time
                       the time limits pass (default 100: twice the baseline)
  --no-symbols, --sysroot DIR, --python-frames user|all, --python-user PKG
                       as for cuxfer report (how call sites are named)
  -h, --help           show this help

Exit status: 0 the run keeps the budget (or the budget was written); 1 it does
not; 2 usage error, a malformed budget, unreadable traces, or a budget for
another program.
)";

namespace {

int usage(const char* command, const std::string& line) {
  std::fprintf(stderr, "%s: %s\n", command, line.c_str());
  return kExitUsage;
}

bool parse_percent(std::string_view option, const std::string& v, double& out, ArgReader& in) {
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(d) || d < 0 || d > 100000) {
    in.fail(fmt::format("--{} needs a percentage from 0 to 100000, got '{}'", option, v));
    return false;
  }
  out = d;
  return true;
}

// The traces read and analyzed, each call site named as a budget names it.
struct AnalyzedRun {
  analyses::Report report;
  check::CheckedRun run;
  // Of a job of summaries: how many processes each part leaves out (an
  // older summary's), which decides what a budget can be checked for.
  analyses::MergedJob::Lacking lacking;
};

// Each of the report's call sites named as a budget names it.
void name_sites(const model::Job& job, AnalyzedRun& out) {
  out.run.report = &out.report;
  for (const analyses::CallSiteTotals& cs : out.report.callsites) {
    policy::Site site;
    std::string why;
    if (cs.id != 0 && analyses::identify_site(job, cs.id - 1, policy::SiteKind::Call, site, why))
      out.run.site_names.emplace_back(std::move(site));
    else
      out.run.site_names.emplace_back(std::nullopt);
  }
}

// Job summaries given (with traces or not): the records merged as `report`
// merges them. A summary from before summaries kept the modules that name
// native sites is refused in one line: its sites could match no budget entry.
bool analyze_summaries(const InputPaths& inputs, const SymbolOptions& symbols, const char* command,
                       AnalyzedRun& out) {
  std::vector<analyses::ProcessRecord> records;
  std::vector<std::string> symbol_kinds, errors;
  if (!gather_records(inputs, symbols, default_jobs(), command, records, symbol_kinds, errors)) return false;
  if (records.empty()) return false;  // each path already has its one line
  for (const auto& r : records)
    if (!r.site_modules) {
      std::fprintf(stderr,
                   "%s: the summary of %s was made by a cuxfer that did not keep the modules naming its call "
                   "sites: make it again with this cuxfer (cuxfer summarize)\n",
                   command, r.process.trace.path.c_str());
      return false;
    }
  analyses::MergedJob merged = analyses::merge_records(std::move(records));
  if (refuse_mixed_runs(merged.job, command)) return false;
  out.lacking = merged.lacking;
  // No machine profile: the check reads measured numbers only, never estimates.
  out.report = analyses::analyze_tally(merged.job, merged.tally, analyses::Thresholds{}, false);
  name_sites(merged.job, out);
  return true;
}

// The traces (or summaries) read and analyzed, each call site named as a
// budget names it.
bool analyze_traces(const std::vector<std::string>& paths, const SymbolOptions& symbols, const char* command,
                    AnalyzedRun& out) {
  std::vector<std::string> split_errors;
  const InputPaths inputs = split_inputs(paths, split_errors);
  if (!inputs.summaries.empty()) return analyze_summaries(inputs, symbols, command, out);
  std::vector<std::string> errors;
  auto traces = load_traces(paths, command, errors);
  if (traces.empty()) return false;  // each path already has its one line
  auto symbolizer = symbols.make();
  model::Job job = model::build_job(std::move(traces), *symbolizer, symbols.python_sites);
  if (refuse_mixed_runs(job, command)) return false;
  // No machine profile: the check reads measured numbers only, never estimates.
  out.report = analyses::analyze(job, analyses::Thresholds{});
  name_sites(job, out);
  return true;
}

// Findings a job of summaries cannot answer for every process: made from a
// part an older summary lacks (sync_copy_idle: the overlap of a process that
// recorded kernels).
bool unanswerable(analyses::FindingKind k, const analyses::MergedJob::Lacking& lacking) {
  using analyses::FindingKind;
  return (lacking.overlap && k == FindingKind::SyncCopyIdle) ||
         (lacking.repeated_copies && (k == FindingKind::DuplicateUploads || k == FindingKind::RoundTrips)) ||
         (lacking.managed && k == FindingKind::ManagedMigrations);
}

// The budget as summaries can answer it: findings they cannot answer are
// not forbidden (one line on stderr names them, so that none passes unsaid);
// an NVTX range entry, where a summary lacks the ranges, is refused in one
// line (false: exit 2).
bool budget_for_summaries(const check::Budget& budget, const std::string& budget_path, const char* command,
                          const analyses::MergedJob::Lacking& lacking, check::Budget& out) {
  out = budget;
  std::vector<std::string> unchecked;
  for (size_t i = 0; i < out.entries.size(); ++i) {
    check::BudgetEntry& e = out.entries[i];
    if (e.scope == check::Scope::Range && lacking.ranges) {
      std::fprintf(stderr,
                   "%s: %s: entries[%zu] checks NVTX range '%s', which %zu process(es) of summaries written before "
                   "they kept NVTX ranges leave out: check the traces, or summarize them again\n",
                   command, budget_path.c_str(), i, e.range.c_str(), lacking.ranges);
      return false;
    }
    auto cannot = [&](analyses::FindingKind k) { return unanswerable(k, lacking); };
    for (analyses::FindingKind k : e.forbid_findings) {
      const std::string name = analyses::finding_kind_name(k);
      if (cannot(k) && std::find(unchecked.begin(), unchecked.end(), name) == unchecked.end())
        unchecked.push_back(name);
    }
    std::erase_if(e.forbid_findings, cannot);
  }
  if (!unchecked.empty()) {
    std::string list;
    for (const auto& n : unchecked) list += (list.empty() ? "" : ", ") + n;
    std::fprintf(stderr,
                 "%s: not checked from summaries (made from parts older summaries lack): "
                 "forbidden findings %s\n",
                 command, list.c_str());
  }
  return true;
}

int write_budget_file(const std::string& path, const std::vector<std::string>& traces, const SymbolOptions& symbols,
                      const check::BudgetMargins& margins) {
  const char* command = "cuxfer check";
  AnalyzedRun a;
  if (!analyze_traces(traces, symbols, command, a)) return kExitUsage;
  const check::Budget budget =
      check::budget_from_run(a.run, margins, fmt::format("cuxfer {} check --write-budget", CUXFER_VERSION));
  if (!write_output(path, check::write_budget(budget), command)) return kExitUsage;
  std::fprintf(stderr, "cuxfer check: wrote %s: %zu entries for program '%s' (margin %g %%, time tolerance %g %%)\n",
               path.c_str(), budget.entries.size(), budget.program.c_str(), margins.bytes_percent,
               margins.time_tolerance_percent);
  return 0;
}

}  // namespace

bool load_budget(const std::string& path, const char* command, const char* option, check::Budget& out) {
  std::string error;
  if (check::read_budget_file(path, out, error)) return true;
  std::fprintf(stderr, "%s: %s %s\n", command, option, error.c_str());
  return false;
}

int check_traces(const check::Budget& budget, const std::string& budget_path, const std::vector<std::string>& traces,
                 const CheckSettings& outputs, const char* command) {
  AnalyzedRun a;
  if (!analyze_traces(traces, outputs.symbols, command, a)) return kExitUsage;
  std::vector<std::string> split_errors;
  check::Budget answerable;
  const bool summaries = !split_inputs(traces, split_errors).summaries.empty();
  if (summaries && !budget_for_summaries(budget, budget_path, command, a.lacking, answerable)) return kExitUsage;
  const check::Budget& checked = summaries ? answerable : budget;
  if (std::string mismatch = check::program_mismatch(budget, a.report); !mismatch.empty()) {
    if (!outputs.any_program) {
      std::fprintf(stderr, "%s: %s: %s (--any-program applies it anyway)\n", command, budget_path.c_str(),
                   mismatch.c_str());
      return kExitUsage;
    }
    std::fprintf(stderr, "%s: %s: %s: applied anyway (--any-program)\n", command, budget_path.c_str(),
                 mismatch.c_str());
  }
  const check::CheckResult result = check::check_budget(checked, a.run);
  std::fputs(render::render_check_text(checked, result, budget_path).c_str(), stdout);
  std::fflush(stdout);
  if (!outputs.junit.empty() &&
      !write_output(outputs.junit, render::render_junit(checked, result, budget_path), command))
    return kExitUsage;
  return result.violations() == 0 ? 0 : 1;
}

int run_check(std::vector<std::string> args) {
  const char* command = "cuxfer check";
  ArgReader in(command, std::move(args));
  std::string budget_path, write_path;
  CheckSettings outputs;
  check::BudgetMargins margins;
  bool margin_given = false, tolerance_given = false, force = false;
  SymbolOptions& symbols = outputs.symbols;
  std::vector<std::string> paths;
  OptionTable options(kCheckHelp, Positionals::Collect);
  options.group([&](ArgReader& r) { return symbols.take(r); })
      .value("budget", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v.empty()) r.fail("--budget needs a file name");
               budget_path = v;
             })
      .value("write-budget", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v.empty() || v == "-") r.fail("--write-budget needs a file name");
               write_path = v;
             })
      .value("junit", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v.empty()) r.fail("--junit needs a file name");
               outputs.junit = v;
             })
      .value("margin", 0,
             [&](const std::string& v, ArgReader& r) {
               margin_given = parse_percent("margin", v, margins.bytes_percent, r);
             })
      .value("time-tolerance", 0,
             [&](const std::string& v, ArgReader& r) {
               tolerance_given = parse_percent("time-tolerance", v, margins.time_tolerance_percent, r);
             })
      .flag("force", 0, [&] { force = true; })
      .flag("any-program", 0, [&] { outputs.any_program = true; });
  if (auto status = options.read(in, &paths)) return *status;
  if (budget_path.empty() == write_path.empty())
    return usage(command, "give either --budget FILE (check) or --write-budget FILE (write one)");
  if (!write_path.empty() && (!outputs.junit.empty() || outputs.any_program))
    return usage(command, "--junit and --any-program go with --budget, not --write-budget");
  if (!budget_path.empty() && (margin_given || tolerance_given || force))
    return usage(command, "--margin, --time-tolerance and --force go with --write-budget, not --budget");
  if (paths.empty()) return usage(command, "no trace given (usage: cuxfer check --budget FILE TRACE...)");
  if (!write_path.empty()) return write_budget_file(write_path, paths, symbols, margins);

  check::Budget budget;
  if (!load_budget(budget_path, command, "--budget", budget)) return kExitUsage;
  return check_traces(budget, budget_path, paths, outputs, command);
}

}  // namespace cuxfer::cli
