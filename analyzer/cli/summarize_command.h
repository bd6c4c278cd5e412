// `cuxfer summarize [-j N] [symbol options] -o FILE TRACE|SUMMARY...`
#pragma once

#include <string>
#include <vector>

namespace cuxfer::cli {

// Exit status: 0 summary written, 1 nothing could be read (or the file not
// written), 2 usage error, a summary of another version, or two runs mixed.
int run_summarize(std::vector<std::string> args);

extern const char* const kSummarizeHelp;

}  // namespace cuxfer::cli
