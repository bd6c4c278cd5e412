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
#include "analyzer/cli/trace_inputs.h"
#include "analyzer/model/job.h"
#include "analyzer/render/perfetto_renderer.h"
#include "analyzer/render/sqlite_writer.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::cli {

const char* const kExportHelp =
    R"(Usage: cuxfer export --perfetto FILE [options] TRACE...
       cuxfer export --sqlite FILE [--force] [options] TRACE...

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
  --sqlite FILE   write an SQLite database to FILE (a new file: written under
                  a temporary name in the same directory, then renamed)
  --force         replace an existing --sqlite FILE
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

Exit status: 0 written; 1 no trace could be read, or FILE could not be
written; 2 usage error (also: the --sqlite FILE exists and --force is not given).
)";

namespace {

// Writes the database under a temporary name beside `path` and renames it
// over `path` when complete: a failed export leaves no file behind.
bool export_sqlite(const model::Job& job, const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  std::string temp = fmt::format("{}/.{}.XXXXXX", dir, base);
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) {
    std::fprintf(stderr, "cuxfer export: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
    return false;
  }
  ::close(fd);
  ::chmod(temp.c_str(), 0644);
  std::string error;
  if (!render::write_sqlite(job, temp, error)) {
    ::unlink(temp.c_str());
    std::fprintf(stderr, "cuxfer export: cannot write %s: %s\n", path.c_str(), error.c_str());
    return false;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    std::fprintf(stderr, "cuxfer export: cannot write %s: %s\n", path.c_str(), std::strerror(err));
    return false;
  }
  return true;
}

}  // namespace

int run_export(std::vector<std::string> args) {
  ArgReader in("cuxfer export", std::move(args));
  bool have_output = false, force = false;
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
      .flag("force", 0, [&] { force = true; });
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
  struct stat st {};
  if (!sqlite.empty() && !force && ::lstat(sqlite.c_str(), &st) == 0) {
    std::fprintf(stderr, "cuxfer export: %s exists (--force replaces it)\n", sqlite.c_str());
    return kExitUsage;
  }
  std::vector<std::string> errors;
  auto traces = load_traces(paths, "cuxfer export", errors);
  if (traces.empty()) return 1;
  auto symbolizer = symbols.make();
  model::Job job = model::build_job(std::move(traces), *symbolizer, symbols.python_sites);
  if (refuse_mixed_runs(job, "cuxfer export")) return kExitUsage;
  if (have_output && !output.empty() && !write_output(output, render::render_perfetto(job), "cuxfer export"))
    return 1;
  if (!sqlite.empty() && !export_sqlite(job, sqlite)) return 1;
  return 0;
}

}  // namespace cuxfer::cli
