// `cuxfer record [options] -- command args...`: runs a command with the
// cuxfer shim preloaded and says which traces it wrote. The shim is told what
// to do through CUXFER_* environment variables only (docs/cli.md).
#pragma once

#include <string>
#include <vector>

namespace cuxfer::cli {

// Returns on usage and launch errors (2, 126, 127); otherwise exits or dies
// exactly as the command did.
int run_record(std::vector<std::string> args);
extern const char* const kRecordHelp;

}  // namespace cuxfer::cli
