#include "analyzer/cli/summarize_command.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "analyzer/analyses/summary.h"
#include "analyzer/cli/options.h"
#include "analyzer/cli/summary_inputs.h"
#include "analyzer/cli/trace_inputs.h"

namespace cuxfer::cli {

const char* const kSummarizeHelp =
    R"(Usage: cuxfer summarize [options] -o FILE TRACE|SUMMARY...

Reduces traces to a job summary (schema cuxfer.summary/1, docs/report.md,
"Job summaries"): per process, the totals, call sites, findings' inputs,
NVTX ranges, managed memory and repeated copies the report needs, without the
events; tens of KiB per process. Run it
next to the traces (on each node, or per rank at exit), then give the
summaries to `cuxfer report` as you would the traces. Summaries given here
are merged into the new one (a tree of merges is the same as one).

Options:
  -o, --output FILE  write the summary to FILE (replaced if it exists)
  -j, --jobs N       traces read and reduced at once (default: the machine's
                     cores); the summary is the same for every N
  --no-symbols, --sysroot DIR, --python-frames user|all, --python-user PKG
                     as for `cuxfer report`: call sites are named here, where
                     the traced binaries are
  -q, --quiet        print nothing but errors
  -h, --help         show this help

Exit status: 0 summary written; 1 no trace or summary could be read; 2 usage
error, a summary of another version, or the traces of two different runs.
)";

int run_summarize(std::vector<std::string> args) {
  ArgReader in("cuxfer summarize", std::move(args));
  SymbolOptions symbols;
  std::string output;
  size_t jobs = default_jobs();
  bool quiet = false;
  std::vector<std::string> paths;
  OptionTable options(kSummarizeHelp, Positionals::Collect);
  options.flag("quiet", 'q', [&] { quiet = true; });
  options.group([&](ArgReader& r) { return symbols.take(r); })
      .value("output", 'o', [&](const std::string& v, ArgReader&) { output = v; })
      .value("jobs", 'j', [&](const std::string& v, ArgReader& r) {
        size_t n = 0;
        if (parse_count("jobs", v, 4096, n, r)) jobs = n == 0 ? 1 : n;
      });
  if (auto status = options.read(in, &paths)) return *status;
  if (output.empty()) {
    std::fprintf(stderr, "cuxfer summarize: -o FILE is required (the summary is a file to give to cuxfer report)\n");
    return kExitUsage;
  }
  if (paths.empty()) {
    std::fprintf(stderr, "cuxfer summarize: no trace given (usage: cuxfer summarize -o FILE TRACE...)\n");
    return kExitUsage;
  }
  std::vector<std::string> errors;
  InputPaths inputs = split_inputs(paths, errors);
  std::vector<analyses::ProcessRecord> records;
  std::vector<std::string> symbol_kinds;
  if (!gather_records(inputs, symbols, jobs, "cuxfer summarize", records, symbol_kinds, errors)) return kExitUsage;
  if (records.empty()) return 1;
  // The checks a report makes, made here too, so that a summary of two runs
  // is never written.
  {
    // Each process once (a summary and its own trace, two summaries of one trace).
    std::set<std::string> seen;
    std::vector<analyses::ProcessRecord> unique;
    size_t duplicates = 0;
    std::string first_duplicate;
    for (auto& r : records) {
      if (seen.insert(r.identity()).second) {
        unique.push_back(std::move(r));
      } else if (duplicates++ == 0) {
        first_duplicate = r.process.trace.path;
      }
    }
    records = std::move(unique);
    if (duplicates)
      std::fprintf(stderr, "cuxfer summarize: %zu process%s given more than once, counted once (first: %s)\n",
                   duplicates, duplicates == 1 ? "" : "es", first_duplicate.c_str());
    // The runs check needs the processes' headers only (analyses::mixed_runs).
    model::Job headers;
    for (const auto& r : records) {
      model::Process p;
      p.trace.path = r.process.trace.path;
      p.trace.has_process = r.process.trace.has_process;
      p.trace.process = r.process.trace.process;
      p.trace.notes = r.process.trace.notes;
      headers.processes.push_back(std::move(p));
    }
    if (refuse_mixed_runs(headers, "cuxfer summarize")) return kExitUsage;
  }
  analyses::SummaryHeader header;
  header.cuxfer_version = CUXFER_VERSION;
  for (const auto& s : symbol_kinds) header.symbols += (header.symbols.empty() ? "" : "; ") + s;
  if (!write_output(output, analyses::write_summary(header, records), "cuxfer summarize")) return 1;
  if (!quiet)
    std::fprintf(stderr, "cuxfer summarize: %zu process%s summarized into %s\n", records.size(),
                 records.size() == 1 ? "" : "es", output.c_str());
  return 0;
}

}  // namespace cuxfer::cli
