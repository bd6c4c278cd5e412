#include "policy/site_matcher.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "trace/python_frame.h"

namespace cuxfer::policy {

void SiteMatcher::bind(const Policy& policy, const LoadedModule* modules, size_t count) {
  slots_.clear();
  unbound_ = 0;
  // build id -> load bases (a module loaded twice, e.g. from two paths).
  std::unordered_map<std::string, std::vector<uint64_t>> bases;
  std::string id;
  for (size_t i = 0; i < count; ++i)
    if (normalize_build_id(modules[i].build_id, id)) bases[id].push_back(modules[i].base);
  python_.clear();
  for (uint32_t e = 0; e < policy.entries.size(); ++e) {
    const Entry& entry = policy.entries[e];
    if (entry.site.python()) {
      python_.push_back({entry.site.python_file, entry.site.python_function, entry.site.python_line, entry.min_bytes,
                         e, entry.site.kind, entry.path});
      continue;
    }
    auto it = normalize_build_id(entry.site.build_id, id) ? bases.find(id) : bases.end();
    if (it == bases.end()) {
      ++unbound_;
      continue;
    }
    for (uint64_t base : it->second)
      slots_.push_back({base + entry.site.offset, entry.min_bytes, e, entry.site.kind, entry.path});
  }
  std::sort(slots_.begin(), slots_.end(), [](const Slot& a, const Slot& b) {
    return a.address != b.address ? a.address < b.address : a.entry < b.entry;
  });
}

bool python_file_matches(std::string_view entry_file, std::string_view path) {
  if (entry_file.empty() || entry_file.size() > path.size()) return false;
  if (path == entry_file) return true;
  return path.ends_with(entry_file) && (entry_file.front() == '/' || path[path.size() - entry_file.size() - 1] == '/');
}

int python_entry_distance(std::string_view entry_file, std::string_view entry_function, int entry_line,
                          const PythonFrameName& f) noexcept {
  if (!python_file_matches(entry_file, f.file)) return -1;
  if (entry_function.empty()) return entry_line == f.line ? 0 : -1;
  if (entry_function != f.function) return -1;
  return entry_line && f.line ? (entry_line > f.line ? entry_line - f.line : f.line - entry_line) : 0;
}

bool SiteMatcher::match_python(SiteKind kind, const PythonFrameName& f, uint64_t bytes, Decision& out) const noexcept {
  const PythonSlot* best = nullptr;
  int best_distance = 0;
  for (const PythonSlot& s : python_) {
    if (s.kind != kind || bytes < s.min_bytes) continue;
    const int distance = python_entry_distance(s.file, s.function, s.line, f);
    if (distance < 0) continue;
    if (!best || distance < best_distance) best = &s, best_distance = distance;
  }
  if (!best) return false;
  out.matched = true;
  out.path = best->path;
  out.entry = best->entry;
  return true;
}

Decision SiteMatcher::decide(SiteKind kind, const uint64_t* frames, size_t count, uint64_t bytes,
                             const PythonNames* python) const noexcept {
  if ((slots_.empty() && python_.empty()) || frames == nullptr) return {};
  const auto by_address = [](const Slot& s, uint64_t address) { return s.address < address; };
  for (size_t f = 0; f < count; ++f) {
    const uint64_t address = frames[f];
    if (trace::is_python_frame(address)) {
      PythonFrameName name;
      Decision d;
      if (!python_.empty() && python && python->name(address, name) && match_python(kind, name, bytes, d)) {
        d.frame = static_cast<uint32_t>(f);
        return d;
      }
      continue;
    }
    for (auto it = std::lower_bound(slots_.begin(), slots_.end(), address, by_address);
         it != slots_.end() && it->address == address; ++it) {
      if (it->kind != kind || bytes < it->min_bytes) continue;
      return {true, it->path, it->entry, static_cast<uint32_t>(f)};
    }
  }
  return {};
}

}  // namespace cuxfer::policy
