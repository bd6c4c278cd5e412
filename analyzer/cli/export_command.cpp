#include "analyzer/cli/export_command.h"

#include <cstdio>

#include <fmt/format.h>

#include "analyzer/cli/options.h"
#include "analyzer/cli/trace_inputs.h"
#include "analyzer/model/job.h"
#include "analyzer/render/perfetto_renderer.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::cli {

const char* const kExportHelp =
    R"(Usage: cuxfer export --perfetto FILE [options] TRACE...

Writes the recorded calls of one or more cuxfer traces (a directory stands for
the cuxfer-*.trace files in it) as Chrome/Perfetto trace-event JSON, for
ui.perfetto.dev or chrome://tracing: one slice per call on its process and
thread, GPU copies and memsets (CUPTI records) on one track per device and
stream, and an arrow from each call to its GPU records. Times are
microseconds since the job's earliest event.

Options:
  --perfetto FILE write the trace-event JSON to FILE ('-': standard output)
  --no-symbols    do not open the traced binaries; name frames module+offset
  --sysroot DIR   look for the traced binaries under DIR first
  --python-frames user|all
                  which Python frame names a Python program's call site: the
                  innermost line of its own files (user, the default) or the
                  innermost Python frame, a framework's included (all)
  -h, --help      show this help

Exit status: 0 written; 1 no trace could be read; 2 usage error.
)";

int run_export(std::vector<std::string> args) {
  ArgReader in("cuxfer export", std::move(args));
  bool have_output = false;
  SymbolOptions symbols;
  std::string output;
  std::vector<std::string> paths;
  OptionTable options(kExportHelp, Positionals::Collect);
  options.group([&](ArgReader& r) { return symbols.take(r); })
      .value("perfetto", 0, [&](const std::string& v, ArgReader&) {
        output = v;
        have_output = true;
      });
  if (auto status = options.read(in, &paths)) return *status;
  if (!have_output || output.empty()) {
    std::fprintf(stderr, "cuxfer export: no format given (usage: cuxfer export --perfetto FILE TRACE...)\n");
    return kExitUsage;
  }
  if (paths.empty()) {
    std::fprintf(stderr, "cuxfer export: no trace given (usage: cuxfer export --perfetto FILE TRACE...)\n");
    return kExitUsage;
  }
  std::vector<std::string> errors;
  auto traces = load_traces(paths, "cuxfer export", errors);
  if (traces.empty()) return 1;
  auto symbolizer = symbols.make();
  model::Job job = model::build_job(std::move(traces), *symbolizer, symbols.python_frames);
  return write_output(output, render::render_perfetto(job), "cuxfer export") ? 0 : 1;
}

}  // namespace cuxfer::cli
