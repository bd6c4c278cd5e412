#include "analyzer/cli/diff_command.h"

#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "analyzer/analyses/diff.h"
#include "analyzer/cli/options.h"
#include "analyzer/cli/trace_inputs.h"
#include "analyzer/model/job.h"
#include "analyzer/render/diff_renderer.h"
#include "analyzer/text/units.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::cli {

const char* const kDiffHelp =
    R"(Usage: cuxfer diff [options] BASE NEW

Compares two runs of the same workload, e.g. without and with
`cuxfer record --rewrite=pin`. BASE and NEW are each one trace or a directory
of cuxfer-*.trace files (all the processes of one job). Call sites are matched
by symbol (module, function, file:line; module+offset when unsymbolized), not
by address. Reports per call site and in total: copies, bytes moved by DMA,
bytes staged on the CPU by cuxfer, CPU-blocked time, GPU time (when both runs
have it), wall time, and the time recovered (base minus new CPU-blocked time,
measured). Warns when the two runs did not do the same work.

Options:
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
                  message, domain::message or "outer / inner" path) in both runs
  -h, --help      show this help

Exit status: 0 comparison written; 1 a run has no readable trace, or no call
inside the --range; 2 usage error.
)";

int run_diff(std::vector<std::string> args) {
  ArgReader in("cuxfer diff", std::move(args));
  bool json = false;
  SymbolOptions symbols;
  size_t top = 10;
  std::string output;
  std::optional<std::string> range;
  std::vector<std::string> paths;
  OptionTable options(kDiffHelp, Positionals::Collect);
  options.group([&](ArgReader& r) { return symbols.take(r); })
      .flag("json", 0, [&] { json = true; })
      .value("top", 0, [&](const std::string& v, ArgReader& r) { parse_count("top", v, 1000000, top, r); })
      .value("output", 'o', [&](const std::string& v, ArgReader&) { output = v; })
      .value("range", 0, [&](const std::string& v, ArgReader& r) {
        if (v.empty()) r.fail("--range needs a range name");
        range = v;
      });
  if (auto status = options.read(in, &paths)) return *status;
  if (paths.size() != 2) {
    std::fprintf(stderr, "cuxfer diff: needs two runs, BASE and NEW (usage: cuxfer diff [--json] [-o FILE] BASE NEW)\n");
    return kExitUsage;
  }
  auto symbolizer = symbols.make();
  std::vector<model::Job> jobs;
  std::vector<std::vector<std::string>> used(2);
  std::vector<std::string> skipped;
  for (size_t i = 0; i < 2; ++i) {
    std::vector<std::string> errors;
    auto traces = load_traces({paths[i]}, "cuxfer diff", errors);
    for (const auto& e : errors) skipped.push_back("skipped " + e);
    if (traces.empty()) {
      std::fprintf(stderr, "cuxfer diff: %s: no trace could be read (%s run)\n", paths[i].c_str(),
                   i == 0 ? "base" : "new");
      return 1;
    }
    for (const auto& t : traces) used[i].push_back(t.path);
    jobs.push_back(model::build_job(std::move(traces), *symbolizer, symbols.python_sites));
    if (refuse_mixed_runs(jobs.back(), i == 0 ? "cuxfer diff (base)" : "cuxfer diff (new)")) return kExitUsage;
    if (range && !keep_only_range(jobs.back(), *range, i == 0 ? "cuxfer diff (base)" : "cuxfer diff (new)")) return 1;
  }
  analyses::Diff d = analyses::diff_jobs(jobs[0], jobs[1]);
  d.base.traces = used[0];
  d.now.traces = used[1];
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
