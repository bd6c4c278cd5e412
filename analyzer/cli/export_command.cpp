#include "analyzer/cli/export_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"

#include "analyzer/cli/options.h"
#include "analyzer/cli/output_file.h"
#include "analyzer/cli/trace_inputs.h"
#include "analyzer/model/job.h"
#include "analyzer/render/perfetto_renderer.h"
#include "analyzer/render/sqlite_writer.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::cli {

const char* const kExportHelp =
    R"(Usage: cuxfer export --perfetto FILE [options] TRACE...
       cuxfer export --sqlite FILE [options] TRACE...

Writes the recorded calls of one or more cuxfer traces (a directory stands for
the cuxfer-*.trace files in it) as Chrome/Perfetto trace-event JSON, for
ui.perfetto.dev or chrome://tracing: one slice per call on its process and
thread, GPU copies and memsets (CUPTI records) on one track per device and
stream, and an arrow from each call to its GPU records. Times are
microseconds since the job's earliest event.

With --sqlite, writes an SQLite database for your own SQL instead (schema
cuxfer.sqlite/1, docs/sqlite.md): processes, calls, gpu_records, call_sites,
call_site_frames, findings and meta; times in nanoseconds, bytes in bytes.

Options:
  --perfetto FILE write the trace-event JSON to FILE ('-': standard output)
  --sqlite FILE   write an SQLite database to FILE
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
  -h, --help      show this help

Prints one line for each file written. Exit status: 0 written; 1 no trace
could be read, or FILE could not be written; 2 usage error.
)";

namespace {

// "wrote FILE: what" on standard output, or nothing when FILE is standard
// output (the JSON is there).
void say_written(const std::string& path, const std::string& what) {
  if (path != "-") std::printf("cuxfer export: wrote %s: %s\n", path.c_str(), what.c_str());
}

std::string job_summary(const model::Job& job) {
  const size_t calls = job.calls.size();
  return fmt::format("{} call{} from {} process{}", calls, calls == 1 ? "" : "s", job.processes.size(),
                     job.processes.size() == 1 ? "" : "es");
}

}  // namespace

int run_export(std::vector<std::string> args) {
  ArgReader in("cuxfer export", std::move(args));
  bool have_output = false;
  SymbolOptions symbols;
  std::string output, sqlite;
  std::vector<std::string> paths;
  OptionTable options(kExportHelp, Positionals::Collect);
  options.group([&](ArgReader& r) { return symbols.take(r); })
      .value("perfetto", 0, [&](const std::string& v, ArgReader&) {
        output = v;
        have_output = true;
      })
      .value("sqlite", 0, [&](const std::string& v, ArgReader&) { sqlite = v; })
      .flag("force", 0, [] {});  // files are always replaced
  if (auto status = options.read(in, &paths)) return *status;
  if ((!have_output || output.empty()) && sqlite.empty()) {
    std::fprintf(stderr, "cuxfer export: no format given (usage: cuxfer export --perfetto|--sqlite FILE TRACE...)\n");
    return kExitUsage;
  }
  if (paths.empty()) {
    std::fprintf(stderr, "cuxfer export: no trace given (usage: cuxfer export --perfetto|--sqlite FILE TRACE...)\n");
    return kExitUsage;
  }
  if (sqlite == "-") {
    std::fprintf(stderr, "cuxfer export: --sqlite needs a file, not standard output\n");
    return kExitUsage;
  }
  std::vector<std::string> errors;
  auto traces = load_traces(paths, "cuxfer export", errors);
  if (traces.empty()) return 1;
  auto symbolizer = symbols.make();
  model::Job job = model::build_job(std::move(traces), *symbolizer, symbols.python_sites);
  if (refuse_mixed_runs(job, "cuxfer export")) return kExitUsage;
  if (have_output && !output.empty()) {
    if (!write_output(output, render::render_perfetto(job), "cuxfer export")) return 1;
    say_written(output, "Perfetto trace-event JSON, " + job_summary(job) + " (open it in ui.perfetto.dev)");
  }
  if (!sqlite.empty()) {
    const bool ok = replace_file_with(
        sqlite, [&](int, const std::string& temp, std::string& error) { return render::write_sqlite(job, temp, error); },
        "cuxfer export");
    if (!ok) return 1;
    say_written(sqlite, "SQLite database, " + job_summary(job) + " (schema cuxfer.sqlite/1, docs/sqlite.md)");
  }
  return 0;
}

}  // namespace cuxfer::cli
