// What `report`, `diff` and `export` share: reading traces named on the
// command line, the symbolization options, and writing the result.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/cli/options.h"
#include "analyzer/model/job.h"
#include "analyzer/model/machine_profile.h"
#include "analyzer/symbolize/symbolizer.h"
#include "trace/reader.h"

namespace cuxfer::cli {

// --no-symbols, --sysroot DIR, --python-frames user|all and --python-user PKG[,PKG...].
struct SymbolOptions {
  bool enabled = true;
  std::string sysroot;  // without trailing '/'
  symbolize::PythonSiteRule python_sites;
  // Consumes one of the options if it is next; false otherwise.
  bool take(ArgReader& in);
  std::unique_ptr<symbolize::Symbolizer> make() const {
    return symbolize::make_symbolizer(enabled, sysroot);
  }
};

// The machine profile estimates use: `path` when given (--profile), else,
// unless `none` (--no-profile), the profile of the traces' host (never a
// simulated one for real traces, or the reverse). `note` says which, or that
// there is none. False (after one line "<command>: --profile: ...") when the
// given file cannot be used.
bool choose_profile(const model::Job& job, const std::string& path, bool none, const char* command,
                    std::optional<model::MachineProfile>& profile, std::string& note);

// A directory stands for the cuxfer-*.trace files in it, in name order; one
// that cannot be listed or holds none adds a line to `errors`.
std::vector<std::string> expand_directories(const std::vector<std::string>& paths,
                                            std::vector<std::string>& errors);

// The run folders in `dir`: its subdirectories that hold a cuxfer-*.trace
// file, in name order, when `dir` itself holds none (several runs of one
// workload: `cuxfer record -o DIR/1 ...`, `-o DIR/2 ...`, or the numbered
// folders `record` makes in DIR). Empty for anything else.
std::vector<std::string> run_folders(const std::string& dir);

// Expands directories, drops repeated files and reads the traces; every file
// that cannot be used gets one line "<command>: <why>" on stderr and in
// `errors`. The result is empty when nothing could be read.
// `jobs`: how many files are read at once (-j); the traces come back in the
// order of the paths whatever it is. `events`: what to do with the event
// blocks (trace::EventBlocks; by default, keep them).
std::vector<trace::Trace> load_traces(const std::vector<std::string>& paths, const char* command,
                                      std::vector<std::string>& errors, size_t jobs = 1,
                                      const trace::EventBlocks& events = {});

// The traces are ranks of two different runs (analyses::mixed_runs): one line
// "<command>: ..." naming both, and true (the caller exits 2). A directory
// that collected two runs would otherwise be reported as one job.
bool refuse_mixed_runs(const model::Job& job, const char* command);

// --range NAME: keeps only the calls made inside that NVTX range
// (model::keep_range) and adds a note saying how many; false (after one line
// "<command>: --range ...", naming the ranges there are) when none ran there.
bool keep_only_range(model::Job& job, const std::string& name, const char* command);
// Its parts, for a report that streams the calls and chooses them as they
// pass (analyses::CallSelection): the line when the job holds no range (true
// when said), the line when no call ran inside `name`, and the note.
bool say_if_no_ranges(const model::Job& job, const std::string& name, const char* command);
void say_no_call_inside(const model::Job& job, const std::string& name, const char* command);
std::string range_note(const std::string& name, size_t kept, size_t calls);

// Writes `text` to `path` ("" or "-": standard output), replacing the file
// atomically (replace_file); on failure prints one line "<command>: cannot
// write ..." and returns false.
bool write_output(const std::string& path, const std::string& text, const char* command);

}  // namespace cuxfer::cli
