// `cuxfer report [--json|--csv] [--top N] [-o FILE] TRACE...`
#pragma once

#include <string>
#include <vector>

namespace cuxfer::cli {

// Exit status: 0 report written, 1 no trace usable (or output not writable),
// 2 usage error.
int run_report(std::vector<std::string> args);

// Shared with `cuxfer export`. Writes `text` to `path` ("" or "-": standard
// output); on failure prints one line "<command>: cannot write ..." and
// returns false.
bool write_output(const std::string& path, const std::string& text, const char* command);
// A directory stands for the cuxfer-*.trace files in it, in name order; one
// that cannot be listed or holds none adds a line to `errors`.
std::vector<std::string> expand_directories(const std::vector<std::string>& paths,
                                            std::vector<std::string>& errors);
extern const char* const kReportHelp;

}  // namespace cuxfer::cli
