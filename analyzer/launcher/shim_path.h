// Where the shim is, and how it goes into LD_PRELOAD (record's mechanism,
// shared by `cuxfer record` and `cuxfer tune`).
#pragma once

#include <string>

namespace cuxfer::launcher {

// The shim next to this executable: <dir of /proc/self/exe>/../lib/libcuxfer.so,
// else ../<install libdir>/libcuxfer.so (lib64, lib/x86_64-linux-gnu) if there.
std::string default_shim_path();

// LD_PRELOAD with `shim` first and whatever was there kept after it (not
// duplicated when it is already in the list).
std::string prepend_preload(const std::string& shim, const char* existing);

}  // namespace cuxfer::launcher
