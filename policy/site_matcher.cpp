#include "policy/site_matcher.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace cuxfer::policy {

void SiteMatcher::bind(const Policy& policy, const LoadedModule* modules, size_t count) {
  slots_.clear();
  unbound_ = 0;
  // build id -> load bases (a module loaded twice, e.g. from two paths).
  std::unordered_map<std::string, std::vector<uint64_t>> bases;
  std::string id;
  for (size_t i = 0; i < count; ++i)
    if (normalize_build_id(modules[i].build_id, id)) bases[id].push_back(modules[i].base);
  for (uint32_t e = 0; e < policy.entries.size(); ++e) {
    const Entry& entry = policy.entries[e];
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

Decision SiteMatcher::decide(SiteKind kind, const uint64_t* frames, size_t count, uint64_t bytes) const noexcept {
  if (slots_.empty() || frames == nullptr) return {};
  const auto by_address = [](const Slot& s, uint64_t address) { return s.address < address; };
  for (size_t f = 0; f < count; ++f) {
    const uint64_t address = frames[f];
    for (auto it = std::lower_bound(slots_.begin(), slots_.end(), address, by_address);
         it != slots_.end() && it->address == address; ++it) {
      if (it->kind != kind || bytes < it->min_bytes) continue;
      return {true, it->path, it->entry, static_cast<uint32_t>(f)};
    }
  }
  return {};
}

}  // namespace cuxfer::policy
