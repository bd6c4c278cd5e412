// `cuxfer report [--json|--csv] [--top N] [-o FILE] TRACE...`
#pragma once

#include <string>
#include <vector>

namespace cuxfer::cli {

// Exit status: 0 report written, 1 no trace usable (or output not writable),
// 2 usage error.
int run_report(std::vector<std::string> args);

extern const char* const kReportHelp;

}  // namespace cuxfer::cli
