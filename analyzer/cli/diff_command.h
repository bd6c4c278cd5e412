// `cuxfer diff BASE NEW`: compare two runs of the same workload.
#pragma once

#include <string>
#include <vector>

namespace cuxfer::cli {

extern const char* const kDiffHelp;

int run_diff(std::vector<std::string> args);

}  // namespace cuxfer::cli
