#include "analyzer/launcher/shim_path.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <string_view>

namespace cuxfer::launcher {
namespace {

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

}  // namespace

std::string default_shim_path() {
  std::string self = real_path("/proc/self/exe");
  size_t slash = self.rfind('/');
  if (slash == std::string::npos) return {};
  const std::string bin_dir = self.substr(0, slash);
  const std::string build_layout = bin_dir + "/../lib/libcuxfer.so";
#ifdef CUXFER_INSTALL_LIBDIR
  if (::access(build_layout.c_str(), F_OK) != 0) {
    std::string installed = bin_dir + "/../" CUXFER_INSTALL_LIBDIR "/libcuxfer.so";
    if (::access(installed.c_str(), F_OK) == 0) return installed;
  }
#endif
  return build_layout;
}

std::string prepend_preload(const std::string& shim, const char* existing) {
  if (!existing || !*existing) return shim;
  std::string_view rest(existing);
  // ld.so separates entries with ':' or ' '.
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t end = rest.find_first_of(": ", pos);
    if (end == std::string_view::npos) end = rest.size();
    if (rest.substr(pos, end - pos) == shim) return std::string(existing);
    pos = end + 1;
  }
  return shim + ":" + std::string(existing);
}

}  // namespace cuxfer::launcher
