// Where the shim is, and how it goes into LD_PRELOAD (record's mechanism,
// shared by `cuxfer record` and `cuxfer tune`).
#pragma once

#include <string>

namespace cuxfer::launcher {

// The shim next to this executable: <dir of /proc/self/exe>/../lib/libcuxfer.so,
// else ../<install libdir>/libcuxfer.so (lib64, lib/x86_64-linux-gnu) if there.
std::string default_shim_path();

// LD_PRELOAD with `shim` first and whatever was there kept after it (not
// duplicated when it is already in the list), except sanitizer runtimes:
// those `existing` starts with stay in front of the shim, and
// `runtime_first` (the runtime the program needs in first place, see
// runtime_needing_first_place; "" for none) is put in front when the list
// lacks it. AddressSanitizer aborts a program whose initial library list
// does not start with its runtime; the shim after it works the same.
std::string prepend_preload(const std::string& shim, const char* existing, const std::string& runtime_first = {});

// Whether an LD_PRELOAD entry is a sanitizer runtime (libasan.so.8,
// /usr/lib/.../libtsan.so.2, libclang_rt.asan-x86_64.so, ...).
bool is_sanitizer_runtime(const std::string& entry);

// ASAN_OPTIONS for a program whose LD_PRELOAD list `preload` starts with
// GCC's AddressSanitizer runtime (libasan.so*): `existing` with
// intercept_tls_get_addr=0 added, unless it sets that option itself; "" when
// nothing is to be set. GCC 12's LeakSanitizer can crash at exit beside the
// shim in its dynamic-TLS bookkeeping; its leak check does not need it.
std::string asan_options_for(const std::string& preload, const char* existing);

}  // namespace cuxfer::launcher
