// `cuxfer policy [-o FILE] [--force] TRACE...`: writes the policy entries
// (docs/policy.md) that the report's findings support.
#pragma once

#include <string>
#include <vector>

namespace cuxfer::cli {

// Exit status: 0 policy written (possibly with no entries), 1 no trace usable
// or the file could not be written, 2 usage error.
int run_policy(std::vector<std::string> args);

extern const char* const kPolicyHelp;

}  // namespace cuxfer::cli
