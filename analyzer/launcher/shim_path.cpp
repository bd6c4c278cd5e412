#include "analyzer/launcher/shim_path.h"

#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
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

bool is_sanitizer_runtime(const std::string& entry) {
  const std::string_view base = std::string_view(entry).substr(entry.rfind('/') + 1);
  for (std::string_view kind : {"asan", "hwasan", "tsan", "lsan", "msan", "ubsan"}) {
    const std::string gcc = "lib" + std::string(kind) + ".so", clang = "libclang_rt." + std::string(kind) + "-";
    if (base.substr(0, gcc.size()) == gcc || base.substr(0, clang.size()) == clang) return true;
  }
  return false;
}

std::string asan_options_for(const std::string& preload, const char* existing) {
  const std::string first = preload.substr(0, preload.find_first_of(": "));
  const std::string_view base = std::string_view(first).substr(first.rfind('/') + 1);
  if (base.substr(0, 10) != "libasan.so") return {};
  const std::string_view options = existing ? existing : "";
  if (options.find("intercept_tls_get_addr") != std::string_view::npos) return {};
  return options.empty() ? std::string("intercept_tls_get_addr=0") : std::string(options) + ":intercept_tls_get_addr=0";
}

std::string prepend_preload(const std::string& shim, const char* existing, const std::string& runtime_first) {
  const std::string_view list = existing ? existing : "";
  // ld.so separates entries with ':' or ' '. `front_end`: where the sanitizer
  // runtimes at the front of the list end (the separator after the last one).
  bool has_shim = false, has_runtime = false, leading = true, any_front = false;
  size_t front_end = 0;
  const std::string_view first_base = std::string_view(runtime_first).substr(runtime_first.rfind('/') + 1);
  for (size_t pos = 0; pos < list.size();) {
    size_t end = list.find_first_of(": ", pos);
    if (end == std::string_view::npos) end = list.size();
    const std::string entry(list.substr(pos, end - pos));
    if (!entry.empty()) {
      has_shim |= entry == shim;
      has_runtime |= !runtime_first.empty() && std::string_view(entry).substr(entry.rfind('/') + 1) == first_base;
      leading = leading && is_sanitizer_runtime(entry);
      if (leading) front_end = end, any_front = true;
    }
    pos = end + 1;
  }
  const std::string first = runtime_first.empty() || has_runtime ? std::string() : runtime_first;
  if (has_shim) return list.empty() ? first : first.empty() ? std::string(list) : first + ":" + std::string(list);
  std::string out = first;
  const std::string_view front = list.substr(0, front_end);
  const std::string_view rest = any_front ? list.substr(std::min(front_end + 1, list.size())) : list;
  for (std::string_view part : {std::string_view(front), std::string_view(shim), rest}) {
    if (part.empty()) continue;
    if (!out.empty()) out += ':';
    out += part;
  }
  return out;
}

}  // namespace cuxfer::launcher
