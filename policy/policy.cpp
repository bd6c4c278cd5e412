#include "policy/policy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace cuxfer::policy {

namespace {
constexpr const char* kPathNames[] = {"passthrough", "stage", "register", "zero_copy", "exclude"};
constexpr const char* kKindNames[] = {"call", "allocation"};
}  // namespace

const char* path_name(Path p) {
  const auto i = static_cast<unsigned>(p);
  return i < std::size(kPathNames) ? kPathNames[i] : "?";
}

const char* site_kind_name(SiteKind k) {
  const auto i = static_cast<unsigned>(k);
  return i < std::size(kKindNames) ? kKindNames[i] : "?";
}

bool parse_path(std::string_view name, Path& out) {
  for (unsigned i = 0; i < std::size(kPathNames); ++i)
    if (name == kPathNames[i]) {
      out = static_cast<Path>(i);
      return true;
    }
  return false;
}

bool parse_site_kind(std::string_view name, SiteKind& out) {
  for (unsigned i = 0; i < std::size(kKindNames); ++i)
    if (name == kKindNames[i]) {
      out = static_cast<SiteKind>(i);
      return true;
    }
  return false;
}

bool normalize_build_id(std::string_view in, std::string& out) {
  // GNU build ids are 20 bytes (SHA-1) by default; --build-id=md5/uuid give
  // 16, xxhash 8, and a linker may be given any hex string.
  if (in.size() < 2 || in.size() > 128 || in.size() % 2 != 0) return false;
  out.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    out[i] = c;
  }
  return true;
}

bool same_site(const Site& a, const Site& b) { return a.kind == b.kind && site_identity(a) == site_identity(b); }

std::string site_identity(const Site& s) {
  if (s.python()) return "py:" + s.python_file + ":" + s.python_function + ":" + std::to_string(s.python_line);
  char off[24];
  std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(s.offset));
  return s.build_id + off;
}

bool read_policy_file(const std::string& path, Policy& out, std::string& error) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, n);
    if (text.size() > (64u << 20)) {
      std::fclose(f);
      error = path + ": larger than 64 MiB: not a policy file";
      return false;
    }
  }
  const bool read_error = std::ferror(f);
  std::fclose(f);
  if (read_error) {
    error = path + ": cannot read";
    return false;
  }
  std::string why;
  if (!parse_policy(text, out, why)) {
    error = path + ": " + why;
    return false;
  }
  return true;
}

}  // namespace cuxfer::policy
