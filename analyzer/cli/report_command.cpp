#include "analyzer/cli/report_command.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"
#include "analyzer/cli/options.h"
#include "analyzer/model/job.h"
#include "analyzer/render/csv_renderer.h"
#include "analyzer/render/json_renderer.h"
#include "analyzer/render/text_renderer.h"
#include "analyzer/render/units.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::cli {

const char* const kReportHelp =
    R"(Usage: cuxfer report [options] TRACE...

Reads one or more cuxfer traces (all the processes of one job: a fork tree,
MPI ranks; a directory stands for the cuxfer-*.trace files in it) and reports host<->device transfers: totals per direction and host
memory kind, pageable share, calls per API, top call sites, and findings.

Options:
  --json          write the report as JSON (schema cuxfer.report/1, docs/report.md)
  --csv           write the call-site table as CSV (one row per call site,
                  exact integers; columns in docs/cli.md)
  --top N         call sites listed in the text report (default 10); with
                  --json, limits the call sites listed (default: all)
  -o, --output FILE
                  write the report to FILE instead of standard output
  --no-symbols    do not open the traced binaries; name frames module+offset
  --sysroot DIR   look for the traced binaries under DIR first (traces from
                  another machine, its files copied under DIR with their paths)
  -h, --help      show this help

Exit status: 0 report written; 1 no trace could be read; 2 usage error.
)";

bool write_output(const std::string& path, const std::string& text, const char* command) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return std::fflush(stdout) == 0;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::fprintf(stderr, "%s: cannot write %s: %s\n", command, path.c_str(), std::strerror(errno));
    return false;
  }
  out << text;
  out.close();
  if (!out) {
    std::fprintf(stderr, "%s: cannot write %s\n", command, path.c_str());
    return false;
  }
  return true;
}

// A directory stands for the cuxfer-*.trace files in it (a job's output
// directory), in name order.
std::vector<std::string> expand_directories(const std::vector<std::string>& paths,
                                            std::vector<std::string>& errors) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (!fs::is_directory(p, ec)) {
      out.push_back(p);
      continue;
    }
    std::vector<std::string> found;
    for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (name.starts_with("cuxfer-") && name.ends_with(".trace") && it->is_regular_file(ec))
        found.push_back(it->path().string());
    }
    if (ec)
      errors.push_back(fmt::format("{}: cannot list: {}", p, ec.message()));
    else if (found.empty())
      errors.push_back(fmt::format("{}: directory holds no cuxfer-*.trace file", p));
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

int run_report(std::vector<std::string> args) {
  ArgReader in("cuxfer report", std::move(args));
  bool json = false, csv = false, symbols = true;
  std::optional<size_t> top;
  std::string output, sysroot;
  std::vector<std::string> paths;
  while (!in.done() && !in.failed()) {
    if (in.end_of_options()) {
      for (auto& p : in.rest()) paths.push_back(std::move(p));
      break;
    }
    std::string value;
    if (!in.at_option()) {
      paths.push_back(in.take());
    } else if (in.flag("help", 'h')) {
      std::fputs(kReportHelp, stdout);
      return 0;
    } else if (in.flag("json")) {
      json = true;
    } else if (in.flag("csv")) {
      csv = true;
    } else if (in.flag("no-symbols")) {
      symbols = false;
    } else if (in.option("top", 0, value)) {
      uint64_t n = 0;
      if (!parse_unsigned(value, n) || n > 1000000)
        in.fail(fmt::format("--top needs a count, got '{}'", value));
      top = static_cast<size_t>(n);
    } else if (in.option("output", 'o', value)) {
      output = value;
    } else if (in.option("sysroot", 0, value)) {
      sysroot = value;
      while (sysroot.size() > 1 && sysroot.back() == '/') sysroot.pop_back();
    } else if (!in.failed()) {
      std::fprintf(stderr, "%s\n", in.unknown_option().c_str());
      return kExitUsage;
    }
  }
  if (in.failed()) {
    std::fprintf(stderr, "%s\n", in.error().c_str());
    return kExitUsage;
  }
  if (json && csv) {
    std::fprintf(stderr, "cuxfer report: --json and --csv exclude each other\n");
    return kExitUsage;
  }
  if (paths.empty()) {
    std::fprintf(stderr,
                 "cuxfer report: no trace given (usage: cuxfer report [--json|--csv] [--top N] "
                 "[-o FILE] TRACE...)\n");
    return kExitUsage;
  }
  std::vector<std::string> errors;
  std::set<std::string> seen;
  std::vector<std::string> unique;
  for (const auto& p : expand_directories(paths, errors))
    if (seen.insert(p).second) unique.push_back(p);

  auto traces = model::read_traces(unique, errors);
  for (const auto& e : errors) std::fprintf(stderr, "cuxfer report: %s\n", e.c_str());
  if (traces.empty()) return 1;  // each path already has its one line
  auto symbolizer = symbolize::make_symbolizer(symbols, sysroot);
  model::Job job = model::build_job(std::move(traces), *symbolizer);
  analyses::Report report = analyses::analyze(job);
  for (const auto& e : errors) report.notes.push_back("skipped " + e);

  std::string text;
  if (csv) {
    text = render::render_callsites_csv(report, job);
  } else if (json) {
    text = render::render_json(report, {top});
  } else {
    render::TextOptions o;
    o.width = output.empty() || output == "-" ? render::terminal_width() : 100;
    o.top_sites = top.value_or(10);
    text = render::render_text(report, o);
  }
  return write_output(output, text, "cuxfer report") ? 0 : 1;
}

}  // namespace cuxfer::cli
