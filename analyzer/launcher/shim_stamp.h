// The build identity a shim library carries (shim/build_stamp.cpp), read from
// the file without loading it: `cuxfer record` refuses a shim from another
// build before it runs the program.
#pragma once

#include <string>

namespace cuxfer::launcher {

inline constexpr char kShimStampSection[] = ".cuxfer_build";
inline constexpr char kShimStampPrefix[] = "cuxfer-build-id=";

struct ShimStamp {
  bool ok = false;
  std::string build_id;  // "<version>+<commit>", as CUXFER_BUILD_ID
  std::string error;     // why not ok: unreadable, not ELF, no stamp
};

// Reads the .cuxfer_build section of the ELF file at `path`.
ShimStamp read_shim_stamp(const std::string& path);

// The one line `record` prints when the shim is not from this build, or ""
// when it is. `self_id` is this program's CUXFER_BUILD_ID.
std::string shim_mismatch(const std::string& shim_path, const ShimStamp& stamp, const std::string& self_id);

}  // namespace cuxfer::launcher
