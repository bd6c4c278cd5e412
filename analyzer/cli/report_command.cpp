#include "analyzer/cli/report_command.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <numeric>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"
#include "analyzer/cli/options.h"
#include "analyzer/model/machine_profile.h"
#include "analyzer/render/html_renderer.h"
#include "analyzer/cli/trace_inputs.h"
#include "analyzer/cli/summary_inputs.h"
#include "analyzer/analyses/stream.h"
#include "analyzer/analyses/summary.h"
#include "analyzer/analyses/tally.h"
#include "analyzer/model/job.h"
#include "analyzer/render/csv_renderer.h"
#include "analyzer/render/json_renderer.h"
#include "analyzer/render/text_renderer.h"
#include "analyzer/text/units.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::cli {

const char* const kReportHelp =
    R"(Usage: cuxfer report [options] TRACE|SUMMARY...

Reads one or more cuxfer traces (all the processes of one job: a fork tree,
MPI ranks; a directory stands for the cuxfer-*.trace files in it) and reports host<->device transfers: totals per direction and host
memory kind, pageable share, calls per API, top call sites, and findings.
Job summaries (cuxfer summarize) may stand for traces, mixed with them: the
report is the same as of the traces for every part that does not need the
events (docs/report.md, "Job summaries"), and says which parts those are.

Options:
  --json          write the report as JSON (schema cuxfer.report/1, docs/report.md)
  --csv           write the call-site table as CSV (one row per call site,
                  exact integers; columns in docs/cli.md)
  --ranges-csv    write the NVTX range table as CSV instead (one row per
                  range path, nested ranges included; columns in docs/cli.md)
  --html FILE     also write the report as one self-contained HTML file with
                  plots (bandwidth against size with the pinned ceiling, bytes
                  and time per class, a timeline, findings); no network needed
                  to view it. The text (or --json/--csv) report is still
                  printed
  --top N         call sites listed in the text report (default 10); with
                  --json, limits the call sites listed (default: all)
  -o, --output FILE
                  write the report to FILE instead of standard output
                  (FILE and the --html FILE are replaced if they exist)
  --no-symbols    do not open the traced binaries; name frames module+offset
  --sysroot DIR   look for the traced binaries under DIR first (traces from
                  another machine, its files copied under DIR with their paths)
  --python-frames user|all
                  which Python frame names a Python program's call site: the
                  innermost line of its own files (user, the default) or the
                  innermost Python frame, a framework's included (all)
  --python-user PKG[,PKG...]
                  installed packages that are your own code: their lines name
                  call sites (the package of `python -m PKG.mod` or of its
                  console script is taken as yours without this)
  --stack         under the call-site table, each listed site's whole stack,
                  Python and native frames interleaved in call order
  --profile FILE  estimate from this machine profile (cuxfer calibrate);
                  default: the profile of the traces' host in the profile
                  directory, if there is one
  --no-profile    estimate from the run's own pinned transfers (or nominal
                  figures) even when a profile exists
  --range NAME    only the calls made inside the NVTX range NAME (its
                  message, domain::message, or an "outer / inner" path), at
                  any depth; the report says how many that kept
  -j, --jobs N    traces read at once (default: the machine's cores); the
                  report is the same for every N
  --no-stream     read every trace whole instead of a block of events at a
                  time: the same report in more memory (to compare)
  -h, --help      show this help

Exit status: 0 report written; 1 no trace could be read, or no call ran
inside the --range; 2 usage error, a summary of another version, an option
that needs the events given with summaries, or the traces of two different
runs (docs/report.md, "Multi-rank jobs").
)";

namespace {

// A report of cut traces from which not one event could be read is written
// (it says where each was cut), but is no result: one line and exit 1, so
// that a script does not take its empty findings for an all-clear.
bool refuse_unread(const analyses::Report& report, const char* command) {
  const analyses::ReadExtent read = analyses::read_extent(report);
  if (!read.nothing_read()) return false;
  std::fprintf(stderr, "%s: no event could be read: %s is cut short (%s)\n", command,
               read.first_cut->trace_path.c_str(), read.first_cut->cut_reason.c_str());
  return true;
}

// The user docs installed beside this command, <bin>/../share/doc/cuxfer/docs
// (`cmake --install`, the tarball, the .deb), as a file:// URL ending in '/',
// for the HTML report's links; "" where there are none (the wheel, a build tree).
std::string installed_docs_url() {
  char path[PATH_MAX];
  if (!::realpath("/proc/self/exe", path)) return {};
  std::string docs = path;
  docs.erase(docs.rfind('/') + 1);
  const std::string docdir = CUXFER_INSTALL_DOCDIR;
  docs = (docdir.front() == '/' ? docdir : docs + "../" + docdir) + "/docs";
  if (!::realpath(docs.c_str(), path)) return {};
  docs = path;
  if (::access((docs + "/report.md").c_str(), R_OK) != 0) return {};
  return render::file_url(docs) + "/";
}

// What the summary path needs of the options.
struct SummaryReportOptions {
  bool json, csv, ranges_csv;
  std::optional<size_t> top;
  std::string output, html, profile_path;
  bool stacks, range;
};

// A report of summaries (and traces, each reduced to its record as
// `summarize` would): the records merged, then the report's pure functions
// on the merged tally (analyses/summary.h). An option that needs the events
// is refused in one line rather than answered with a wrong or empty part.
int report_summaries(const InputPaths& inputs, const SymbolOptions& symbols, size_t jobs,
                     std::vector<std::string>& errors, const SummaryReportOptions& o) {
  // --csv's and --ranges-csv's tables are the tally's (the staged column and
  // the range sums too). A summary keeps no call's range (--range) and no
  // timeline (--html).
  const char* needs_events = !o.html.empty() ? "--html" : o.range ? "--range" : nullptr;
  if (needs_events) {
    std::fprintf(stderr,
                 "cuxfer report: %s needs the events, which a summary does not hold: give the traces instead of %s\n",
                 needs_events, inputs.summaries.front().c_str());
    return kExitUsage;
  }
  if (!o.profile_path.empty()) {
    std::fprintf(stderr, "cuxfer report: --profile with summaries: a summary's estimates are made without a machine "
                         "profile (as --no-profile); report the traces to use one\n");
    return kExitUsage;
  }
  std::vector<analyses::ProcessRecord> records;
  std::vector<std::string> symbol_kinds;
  if (!gather_records(inputs, symbols, jobs, "cuxfer report", records, symbol_kinds, errors)) return kExitUsage;
  if (records.empty()) return 1;
  analyses::MergedJob merged = analyses::merge_records(std::move(records));
  if (refuse_mixed_runs(merged.job, "cuxfer report")) return kExitUsage;
  analyses::Report report = analyses::analyze_tally(merged.job, merged.tally, {}, false);
  for (auto& n : merged_job_notes(merged, symbol_kinds)) report.notes.push_back(std::move(n));
  for (const auto& e : errors) report.notes.push_back("skipped " + e);
  std::string text;
  if (o.csv) {
    text = render::render_callsites_csv(report);
  } else if (o.ranges_csv) {
    text = render::render_ranges_csv(report);
  } else if (o.json) {
    text = render::render_json(report, {o.top});
  } else {
    render::TextOptions t;
    t.width = o.output.empty() || o.output == "-" ? text::terminal_width() : 100;
    t.top_sites = o.top.value_or(10);
    t.stacks = o.stacks;  // the sites' stacks are in the summary
    text = render::render_text(report, t);
  }
  if (!write_output(o.output, text, "cuxfer report")) return 1;
  return refuse_unread(report, "cuxfer report") ? 1 : 0;
}

// The notes every report of traces ends with.
void add_report_notes(analyses::Report& report, const model::Job& job, const std::string& profile_note,
                      const std::vector<std::string>& errors) {
  if (!profile_note.empty()) report.notes.push_back(profile_note);
  if (auto missing = missing_ranks(job)) report.notes.push_back(*missing);
  for (const auto& e : errors) report.notes.push_back("skipped " + e);
}

struct WriteOptions {
  bool json, csv, ranges_csv;
  std::optional<size_t> top;
  std::string output;
  bool stacks;
};

// Renders the report as asked and writes it; the exit status. Every output
// is the report's alone: the same whether it was streamed or not.
int write_report(const analyses::Report& report, const WriteOptions& o) {
  std::string text;
  if (o.csv) {
    text = render::render_callsites_csv(report);
  } else if (o.ranges_csv) {
    text = render::render_ranges_csv(report);
  } else if (o.json) {
    text = render::render_json(report, {o.top});
  } else {
    render::TextOptions t;
    t.width = o.output.empty() || o.output == "-" ? text::terminal_width() : 100;
    t.top_sites = o.top.value_or(10);
    t.stacks = o.stacks;
    text = render::render_text(report, t);
  }
  if (!write_output(o.output, text, "cuxfer report")) return 1;
  return refuse_unread(report, "cuxfer report") ? 1 : 0;
}

// The traces read before without their events, read again whole (on `jobs`
// threads, in the same order). A trace that can no longer be read (removed
// meanwhile) is said once, as a first read would have said it.
std::vector<trace::Trace> reread_with_events(const std::vector<trace::Trace>& headers, size_t jobs,
                                             std::vector<std::string>& errors) {
  std::vector<std::vector<trace::Trace>> read(headers.size());
  std::vector<std::vector<std::string>> why(headers.size());
  for_each_parallel(headers.size(), jobs, [&](size_t i) { read[i] = model::read_traces({headers[i].path}, why[i]); });
  std::vector<trace::Trace> traces;
  for (size_t i = 0; i < headers.size(); ++i) {
    for (auto& t : read[i]) traces.push_back(std::move(t));
    for (auto& e : why[i]) {
      std::fprintf(stderr, "cuxfer report: %s\n", e.c_str());
      errors.push_back(std::move(e));
    }
  }
  return traces;
}

// The streamed job (analyses/stream.h) of the frame, its processes read on
// `jobs` threads, and the run's references its report is made with
// (Thresholds::known); nullopt when it needs the events after all.
struct StreamedJob {
  analyses::MergedJob merged;
  analyses::Thresholds::RunReferences known;
};
// `plots`, if given, gathers what the HTML report draws (analyses/copy_plots.h);
// `only`, if given, chooses the calls reported (--range), not with `plots`.
std::optional<StreamedJob> stream_job(const model::Job& frame, const analyses::Thresholds& t, size_t jobs,
                                      analyses::CopyPlots* plots, analyses::CallSelection* only) {
  if (analyses::needs_events(frame)) return std::nullopt;
  const size_t n = frame.processes.size();
  std::vector<std::optional<analyses::FirstPass>> inputs(n);
  // A process whose GPU records could not be joined in the stream's window
  // says so, once: the report is then made from the traces read whole.
  std::vector<std::string> why(n);
  auto say_why = [&] {
    for (const std::string& w : why)
      if (!w.empty()) std::fprintf(stderr, "cuxfer report: %s\n", w.c_str());
  };
  for_each_parallel(n, jobs, [&](size_t i) {
    inputs[i] = analyses::stream_references(frame, static_cast<uint32_t>(i), t, &why[i], only);
  });
  std::vector<analyses::FindingsTally> read;
  std::vector<analyses::Fingerprints> fingerprints(n);
  std::vector<analyses::KernelExtents> kernels(n);
  for (size_t i = 0; i < n; ++i) {
    if (!inputs[i]) {
      say_why();
      return std::nullopt;
    }
    read.push_back(std::move(inputs[i]->references));
    fingerprints[i] = std::move(inputs[i]->fingerprints);
    kernels[i] = std::move(inputs[i]->kernels);
  }
  inputs.clear();
  const analyses::Thresholds::RunReferences known = analyses::job_references(read);
  analyses::Thresholds with_known = t;
  with_known.known = &known;
  std::vector<std::optional<analyses::ProcessRecord>> records(n);
  std::vector<uint64_t> bytes(n, 0);
  std::mutex plots_lock;  // each process's plots merged as it ends: the merge keeps what the job draws
  for_each_parallel(n, jobs, [&](size_t i) {
    analyses::CopyPlots own;
    records[i] = analyses::stream_process(frame, static_cast<uint32_t>(i), with_known, &fingerprints[i],
                                          bytes[i], &why[i], plots ? &own : nullptr, &kernels[i], only);
    fingerprints[i] = {};  // paired with their copies: let go
    if (plots && records[i]) {
      const std::lock_guard<std::mutex> hold(plots_lock);
      plots->merge(std::move(own));
    }
  });
  std::vector<analyses::ProcessRecord> all;
  for (auto& r : records) {
    if (!r) {
      say_why();
      return std::nullopt;
    }
    all.push_back(std::move(*r));
  }
  auto merged = analyses::merge_streamed(frame, std::move(all), bytes, with_known);
  if (!merged) return std::nullopt;
  return StreamedJob{std::move(*merged), known};
}

// Writes the HTML report to `path` and says where on stderr: the HTML goes
// to its file and the report still goes where asked (the text report on the
// terminal by default), so `cuxfer report --html r.html run.trace` shows both.
bool write_html(const std::string& path, const analyses::Report& report, const analyses::CopyPlots& plots,
                const model::MachineProfile* profile) {
  if (!write_output(path, render::render_html(report, plots, profile, installed_docs_url()), "cuxfer report"))
    return false;
  std::fprintf(stderr, "cuxfer report: HTML report written to %s\n", path.c_str());
  return true;
}

// What a streamed report needs of the command line.
struct StreamSettings {
  const SymbolOptions& symbols;
  const std::string& profile_path;
  bool no_profile;
  size_t jobs;
  const std::string& html;  // empty: no HTML report
  const std::optional<std::string>& range;  // --range NAME
  WriteOptions write;
};

// The report of the traces at `paths` streamed (analyses/stream.h): its exit
// status; or nullopt when the traces need their events, `traces` then the
// traces read whole (none when none could be read: each has its one line).
std::optional<int> report_streamed(const std::vector<std::string>& paths, const StreamSettings& s,
                                   std::vector<std::string>& errors, std::vector<trace::Trace>& traces) {
  trace::EventBlocks skip;
  skip.skip = true;
  skip.skip_gpu_records = true;  // counted, not kept: as many as the events on a real GPU
  auto headers = load_traces(paths, "cuxfer report", errors, s.jobs, skip);
  if (headers.empty()) return 1;  // each path already has its one line
  const bool may_stream = std::none_of(headers.begin(), headers.end(),
                                       [](const trace::Trace& t) { return analyses::needs_events(t).has_value(); });
  if (!may_stream) {
    traces = reread_with_events(headers, s.jobs, errors);
    return std::nullopt;
  }
  auto symbolizer = s.symbols.make();
  model::Job frame = model::build_job(std::move(headers), *symbolizer, s.symbols.python_sites);
  if (refuse_mixed_runs(frame, "cuxfer report")) return kExitUsage;
  // --range: the calls inside the range, chosen as they pass (the frame holds the range stacks).
  std::optional<analyses::CallSelection> only;
  if (s.range) {
    if (say_if_no_ranges(frame, *s.range, "cuxfer report")) return 1;
    only.emplace();
    only->inside = model::stacks_holding(frame.ranges, *s.range);
    only->calls.assign(frame.processes.size(), 0);
    only->kept.assign(frame.processes.size(), 0);
  }
  std::optional<model::MachineProfile> profile;
  std::string profile_note;
  if (!choose_profile(frame, s.profile_path, s.no_profile, "cuxfer report", profile, profile_note)) return 1;
  analyses::Thresholds thresholds;
  if (profile) thresholds.profile = &*profile;
  // The HTML report's plots are gathered as the traces stream (each GPU record with its call's class).
  const bool html = !s.html.empty();
  analyses::CopyPlots plots;
  std::optional<StreamedJob> streamed =
      stream_job(frame, thresholds, s.jobs, html ? &plots : nullptr, only ? &*only : nullptr);
  if (!streamed) {
    for (auto& p : frame.processes) traces.push_back(std::move(p.trace));
    traces = reread_with_events(traces, s.jobs, errors);
    return std::nullopt;
  }
  thresholds.known = &streamed->known;
  analyses::MergedJob& m = streamed->merged;
  if (only) {
    const uint64_t calls = std::accumulate(only->calls.begin(), only->calls.end(), uint64_t{0});
    const uint64_t kept = std::accumulate(only->kept.begin(), only->kept.end(), uint64_t{0});
    if (kept == 0) {
      say_no_call_inside(frame, *s.range, "cuxfer report");
      return 1;
    }
    m.job.notes.push_back(range_note(*s.range, kept, calls));
  }
  analyses::Report report = analyses::analyze_tally(m.job, m.tally, thresholds, false);
  add_report_notes(report, m.job, profile_note, errors);
  if (html && !write_html(s.html, report, plots, profile ? &*profile : nullptr)) return 1;
  return write_report(report, s.write);
}

}  // namespace

int run_report(std::vector<std::string> args) {
  ArgReader in("cuxfer report", std::move(args));
  bool json = false, csv = false, ranges_csv = false;
  SymbolOptions symbols;
  std::optional<size_t> top;
  std::string output, profile_path, html;
  bool no_profile = false, stacks = false, no_stream = false;
  size_t jobs = default_jobs();
  std::optional<std::string> range;
  std::vector<std::string> paths;
  OptionTable options(kReportHelp, Positionals::Collect);
  options.group([&](ArgReader& r) { return symbols.take(r); })
      .flag("json", 0, [&] { json = true; })
      .flag("csv", 0, [&] { csv = true; })
      .flag("ranges-csv", 0, [&] { ranges_csv = true; })
      .value("top", 0,
             [&](const std::string& v, ArgReader& r) {
               size_t n = 0;
               if (parse_count("top", v, 1000000, n, r)) top = n;
             })
      .value("output", 'o', [&](const std::string& v, ArgReader&) { output = v; })
      .value("html", 0,
             [&](const std::string& v, ArgReader& r) {
               if (v.empty() || v == "-") r.fail("--html needs a file name");
               html = v;
             })
      .value("profile", 0, [&](const std::string& v, ArgReader&) { profile_path = v; })
      .flag("no-profile", 0, [&] { no_profile = true; })
      .flag("stack", 0, [&] { stacks = true; })
      .flag("no-stream", 0, [&] { no_stream = true; })
      .value("range", 0, [&](const std::string& v, ArgReader& r) {
        if (v.empty()) r.fail("--range needs a range name");
        range = v;
      })
      .value("jobs", 'j', [&](const std::string& v, ArgReader& r) {
        size_t n = 0;
        if (parse_count("jobs", v, 4096, n, r)) jobs = n == 0 ? 1 : n;
      });
  if (auto status = options.read(in, &paths)) return *status;
  if (int(json) + int(csv) + int(ranges_csv) > 1) {
    std::fprintf(stderr, "cuxfer report: --json, --csv and --ranges-csv exclude each other\n");
    return kExitUsage;
  }
  if (paths.empty()) {
    std::fprintf(stderr,
                 "cuxfer report: no trace given (usage: cuxfer report [--json|--csv] [--top N] "
                 "[-o FILE] TRACE...)\n");
    return kExitUsage;
  }
  std::vector<std::string> errors;
  // Without summaries, load_traces expands the directories again and says
  // what it could not use itself: the lines of this pass would be twice.
  std::vector<std::string> split_errors;
  InputPaths inputs = split_inputs(paths, split_errors);
  if (!inputs.summaries.empty())
    return report_summaries(inputs, symbols, jobs, split_errors, {json, csv, ranges_csv, top, output, html, profile_path,
                                                             stacks, range.has_value()});
  // The report is made in bounded memory where the traces allow
  // (analyses/stream.h); otherwise, or where they turn out to need their
  // events, from the traces read whole.
  // --csv and --ranges-csv are the report's tables, which the streamed
  // tally holds (the sites' staged bytes, the NVTX ranges' sums); --html's
  // plots are gathered as the traces stream (analyses/copy_plots.h);
  // --range's calls are chosen as they pass, except with --html, whose
  // timeline would still draw the GPU records of the calls left out in their
  // class (read whole, where keep_range unjoins them).
  std::vector<trace::Trace> traces;
  if (no_stream || (range && !html.empty()))
    traces = load_traces(paths, "cuxfer report", errors, jobs);
  else if (auto status = report_streamed(paths, {symbols, profile_path, no_profile, jobs, html, range,
                                                 {json, csv, ranges_csv, top, output, stacks}},
                                         errors, traces))
    return *status;
  if (traces.empty()) return 1;  // each path already has its one line
  auto symbolizer = symbols.make();
  model::Job job = model::build_job(std::move(traces), *symbolizer, symbols.python_sites);
  if (refuse_mixed_runs(job, "cuxfer report")) return kExitUsage;  // ranks of two runs in one directory
  if (range && !keep_only_range(job, *range, "cuxfer report")) return 1;
  std::optional<model::MachineProfile> profile;
  std::string profile_note;
  if (!choose_profile(job, profile_path, no_profile, "cuxfer report", profile, profile_note)) return 1;
  analyses::Thresholds thresholds;
  if (profile) thresholds.profile = &*profile;
  analyses::Report report = analyses::analyze(job, thresholds);
  add_report_notes(report, job, profile_note, errors);

  if (!html.empty() && !write_html(html, report, analyses::copy_plots(job), profile ? &*profile : nullptr))
    return 1;
  return write_report(report, {json, csv, ranges_csv, top, output, stacks});
}

}  // namespace cuxfer::cli
