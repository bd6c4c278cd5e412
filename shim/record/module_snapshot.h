// The loaded objects of the process (path, address range, build id), so the
// analyzer can symbolize return addresses offline. Cheap to poll: glibc
// counts loads and unloads, and the list is re-read only when they change.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "trace/records.h"

namespace cuxfer::shim {

// Every loaded object now; `generation` (optional) changes whenever an object
// is loaded or unloaded.
std::vector<trace::ModuleInfo> loaded_modules(uint64_t* generation = nullptr);

class ModuleTracker {
 public:
  // Modules loaded since the last call (all of them the first time).
  std::vector<trace::ModuleInfo> poll();
  void forget_written() { written_.clear(); last_generation_ = ~0ull; }

 private:
  uint64_t last_generation_ = ~0ull;  // loader_generation() at the last read
  std::set<std::pair<std::string, uint64_t>> written_;
};

}  // namespace cuxfer::shim
