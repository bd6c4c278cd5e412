// `cuxfer record [options] -- command args...`: runs a command with the
// cuxfer shim preloaded and says which traces it wrote. The shim is told what
// to do through CUXFER_* environment variables only (docs/cli.md).
#pragma once

#include <string>
#include <vector>

namespace cuxfer::launcher {

// Returns on usage and launch errors (2, 126, 127); otherwise exits or dies
// exactly as the command did.
int run_record(std::vector<std::string> args);
extern const char* const kRecordHelp;

// The shim next to this executable: <dir of /proc/self/exe>/../lib/libcuxfer.so,
// else ../<install libdir>/libcuxfer.so (lib64, lib/x86_64-linux-gnu) if there.
std::string default_shim_path();

// LD_PRELOAD with `shim` first and whatever was there kept after it (not
// duplicated when it is already in the list).
std::string prepend_preload(const std::string& shim, const char* existing);

}  // namespace cuxfer::launcher
