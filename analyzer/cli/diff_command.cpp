#include "analyzer/cli/diff_command.h"

#include <cstdio>
#include <deque>
#include <optional>

#include <fmt/format.h>

#include "analyzer/analyses/diff.h"
#include "analyzer/cli/options.h"
#include "analyzer/cli/summary_inputs.h"
#include "analyzer/cli/trace_inputs.h"
#include "analyzer/model/job.h"
#include "analyzer/render/diff_renderer.h"
#include "analyzer/text/units.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::cli {

const char* const kDiffHelp =
    R"(Usage: cuxfer diff [options] BASE NEW
       cuxfer diff [options] --base RUN [--base RUN...] --new RUN [--new RUN...]

Compares runs of the same workload, e.g. without and with
`cuxfer record --rewrite=pin`. A run is one trace, a directory of
cuxfer-*.trace files (all the processes of one job), or a job summary
(cuxfer summarize; the same numbers, --range aside). BASE and NEW are each a
run, or a folder of run folders (DIR/1/, DIR/2/, ... from `cuxfer record -o
DIR/N`): several runs of that side. --base and --new name a side's runs one
by one instead. Call sites are matched by symbol (module, function,
file:line; module+offset when unsymbolized), not by address. Reports per call
site and in total: copies, bytes moved by DMA, bytes staged on the CPU by
cuxfer, CPU-blocked time, GPU time (when every run has it), wall time, and
the time recovered (base minus new CPU-blocked time, measured). Warns when
the runs did not do the same work, and first of all when they ran on the
simulated CUDA (their times then mean nothing).

One run each cannot tell a difference from run-to-run noise, and the output
says so. With several runs per side every figure is the median over the
side's runs, and the time recovered comes with the range of the differences
of every pair of a base and a new run and a verdict: beyond noise when every
pair differs the same way and runs that do not differ would do that by
chance at most 5 % of the time (exact permutation test: 2 / C(m+n, m); 4
runs of each are enough), else not conclusive or within noise.

Options:
  --base RUN      a run of the base side (repeat for several); with --new,
                  instead of BASE NEW
  --new RUN       a run of the new side (repeat for several)
  --json          write the comparison as JSON (schema cuxfer.diff/1, docs/report.md)
  --top N         matched call sites listed in the text output (default 10)
  -o, --output FILE
                  write to FILE instead of standard output
  --no-symbols    do not open the traced binaries; name frames module+offset
  --sysroot DIR   look for the traced binaries under DIR first
  --python-frames user|all
                  which Python frame names a Python program's call site: the
                  innermost line of its own files (user, the default) or the
                  innermost Python frame, a framework's included (all)
  --python-user PKG[,PKG...]
                  installed packages that are your own code: their lines name
                  call sites (the package of `python -m PKG.mod` or of its
                  console script is taken as yours without this)
  --range NAME    compare only the calls made inside the NVTX range NAME (a
                  message, domain::message or "outer / inner" path) in every run
  -h, --help      show this help

Exit status: 0 comparison written; 1 a run has no readable trace, or no call
inside the --range; 2 usage error.
)";

namespace {

// A side's runs: each name a run, or a folder of run folders (each one run).
std::vector<std::string> expand_runs(const std::vector<std::string>& names) {
  std::vector<std::string> runs;
  for (const auto& name : names) {
    std::vector<std::string> folders = run_folders(name);
    if (folders.empty())
      runs.push_back(name);
    else
      runs.insert(runs.end(), folders.begin(), folders.end());
  }
  return runs;
}

// Reads each run of one side as a job of its own; skipped traces are notes.
// The exit status when a run cannot be used (after one line): 1 unreadable or
// nothing in the --range, 2 two runs' traces in one; else -1.
// A run given as a job summary (cuxfer summarize) is compared from its
// tallies: the same numbers, without the events.
int load_side(const std::vector<std::string>& runs, bool base, const SymbolOptions& symbols,
              symbolize::Symbolizer& symbolizer, const std::optional<std::string>& range,
              std::deque<model::Job>& jobs, std::deque<analyses::MergedJob>& merged,
              std::vector<analyses::DiffInput>& inputs, std::vector<std::string>& notes) {
  const char* command = base ? "cuxfer diff (base)" : "cuxfer diff (new)";
  for (const auto& run : runs) {
    if (is_summary_file(run)) {
      if (range) {
        std::fprintf(stderr, "cuxfer diff: %s: --range needs the events, which a job summary does not hold: give "
                     "the traces\n", run.c_str());
        return kExitUsage;
      }
      std::vector<analyses::ProcessRecord> records;
      std::vector<std::string> symbol_kinds;
      if (!load_summaries({run}, "cuxfer diff", records, symbol_kinds)) return kExitUsage;
      merged.push_back(analyses::merge_records(std::move(records)));
      if (refuse_mixed_runs(merged.back().job, command)) return kExitUsage;
      inputs.push_back({&merged.back().job, &merged.back().tally});
      continue;
    }
    std::vector<std::string> errors;
    auto traces = load_traces({run}, "cuxfer diff", errors);
    for (const auto& e : errors) notes.push_back("skipped " + e);
    if (traces.empty()) {
      std::fprintf(stderr, "cuxfer diff: %s: no trace could be read (%s run)\n", run.c_str(),
                   base ? "base" : "new");
      return 1;
    }
    jobs.push_back(model::build_job(std::move(traces), symbolizer, symbols.python_sites));
    if (refuse_mixed_runs(jobs.back(), command)) return kExitUsage;
    if (range && !keep_only_range(jobs.back(), *range, command)) return 1;
    inputs.push_back({&jobs.back(), nullptr});
  }
  return -1;
}

}  // namespace

int run_diff(std::vector<std::string> args) {
  ArgReader in("cuxfer diff", std::move(args));
  bool json = false;
  SymbolOptions symbols;
  size_t top = 10;
  std::string output;
  std::optional<std::string> range;
  std::vector<std::string> paths, base_runs, new_runs;
  OptionTable options(kDiffHelp, Positionals::Collect);
  options.group([&](ArgReader& r) { return symbols.take(r); })
      .flag("json", 0, [&] { json = true; })
      .value("top", 0, [&](const std::string& v, ArgReader& r) { parse_count("top", v, 1000000, top, r); })
      .value("output", 'o', [&](const std::string& v, ArgReader&) { output = v; })
      .value("base", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v.empty()) r.fail("--base needs a run (a trace or a folder of traces)");
               base_runs.push_back(v);
             })
      .value("new", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v.empty()) r.fail("--new needs a run (a trace or a folder of traces)");
               new_runs.push_back(v);
             })
      .value("range", 0, [&](const std::string& v, ArgReader& r) {
        if (v.empty()) r.fail("--range needs a range name");
        range = v;
      });
  if (auto status = options.read(in, &paths)) return *status;
  const bool named = !base_runs.empty() || !new_runs.empty();
  if (named && !paths.empty()) {
    std::fprintf(stderr, "cuxfer diff: give BASE NEW or --base/--new runs, not both\n");
    return kExitUsage;
  }
  if (named && (base_runs.empty() || new_runs.empty())) {
    std::fprintf(stderr, "cuxfer diff: needs runs of both sides: --base RUN... and --new RUN...\n");
    return kExitUsage;
  }
  if (!named && paths.size() != 2) {
    std::fprintf(stderr,
                 "cuxfer diff: needs two runs, BASE and NEW (usage: cuxfer diff [--json] [-o FILE] BASE NEW, "
                 "or --base RUN... --new RUN...)\n");
    return kExitUsage;
  }
  if (!named) {
    base_runs = {paths[0]};
    new_runs = {paths[1]};
  }
  auto symbolizer = symbols.make();
  // Deques: calls point into their jobs, and inputs into jobs and merged summaries, which never move.
  std::deque<model::Job> jobs;
  std::deque<analyses::MergedJob> merged;
  std::vector<analyses::DiffInput> base_inputs, new_inputs;
  std::vector<std::string> skipped;
  if (int status = load_side(expand_runs(base_runs), true, symbols, *symbolizer, range, jobs, merged, base_inputs,
                             skipped);
      status >= 0)
    return status;
  if (int status = load_side(expand_runs(new_runs), false, symbols, *symbolizer, range, jobs, merged, new_inputs,
                             skipped);
      status >= 0)
    return status;
  analyses::Diff d = analyses::diff_inputs(base_inputs, new_inputs);
  for (auto& s : skipped) d.notes.push_back(std::move(s));

  std::string text;
  if (json) {
    text = render::render_diff_json(d);
  } else {
    render::DiffTextOptions o;
    o.width = output.empty() || output == "-" ? text::terminal_width() : 100;
    o.top_sites = top;
    text = render::render_diff_text(d, o);
  }
  return write_output(output, text, "cuxfer diff") ? 0 : 1;
}

}  // namespace cuxfer::cli
