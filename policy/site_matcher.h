// Looks up a call's policy decision from its captured stack, in the shim.
//
// bind() turns each entry's (build id, offset) into absolute addresses for
// the modules loaded now — once per module set, off the hot path; it may
// allocate. decide() is the hot path: a binary search per frame in a sorted
// flat table, no allocation, no locks, no system calls, noexcept. A bound
// matcher is immutable, so the shim can build a new one when modules are
// loaded or unloaded and publish it with one atomic pointer store.
//
// The rule (docs/policy.md, "Matching"): frames are tried innermost first;
// the first frame whose return address equals an applicable entry's address
// wins. A Python frame (trace/python_frame.h) is named through PythonNames
// and matches a Python entry of its file and function: the entry of its exact
// line, else the function's entry nearest its line; an entry without a
// function needs the exact line. An entry is applicable when its site kind is the call's kind and the
// call moves (allocates) at least its min_bytes. No frame matches: no
// decision, the shim's defaults apply.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "policy/policy.h"

namespace cuxfer::policy {

// One loaded object as the shim sees it (dl_iterate_phdr): its path (for
// nothing but messages), its load base (dlpi_addr) and its build id (hex;
// empty when it has none: no entry can name it then).
struct LoadedModule {
  std::string_view path;
  uint64_t base = 0;
  std::string_view build_id;
};

// A Python frame as the policy names it.
struct PythonFrameName {
  std::string_view file, function;
  int line = 0;
};

// Names Python frames of a stack (the shim: from its code table).
class PythonNames {
 public:
  virtual ~PythonNames() = default;
  virtual bool name(uint64_t frame, PythonFrameName& out) const noexcept = 0;
};

// `file` as a policy entry names it matches the recorded `path`: equal, or a
// tail of it that starts after a '/'.
bool python_file_matches(std::string_view entry_file, std::string_view path);

// How well a Python entry (file, function, line) fits a frame: -1 not at all;
// else the distance between the lines (0: the exact line, or a line missing on
// either side), the smallest of which wins among the function's entries. An
// entry without a function fits only its exact line. The shim's matcher and
// `cuxfer check` (budget sites) both decide by it.
int python_entry_distance(std::string_view entry_file, std::string_view entry_function, int entry_line,
                          const PythonFrameName& frame) noexcept;

struct Decision {
  bool matched = false;
  Path path = Path::Passthrough;
  uint32_t entry = 0;  // index into Policy::entries
  uint32_t frame = 0;  // index of the matching frame in the stack given
};

class SiteMatcher {
 public:
  SiteMatcher() = default;
  // Computes the absolute address of every entry whose module is among
  // `modules` (the same build id loaded twice gives both addresses). Entries
  // whose module is not loaded are left out, until a later bind().
  void bind(const Policy& policy, const LoadedModule* modules, size_t count);
  void bind(const Policy& policy, const std::vector<LoadedModule>& modules) {
    bind(policy, modules.data(), modules.size());
  }

  // The decision for a call of `kind` moving `bytes`, whose stack is
  // `frames[0..count)` (return addresses, innermost first).
  // `python`: names the stack's Python frames (null: Python frames match nothing).
  Decision decide(SiteKind kind, const uint64_t* frames, size_t count, uint64_t bytes,
                  const PythonNames* python = nullptr) const noexcept;

  // Addresses bound (entries found in the loaded modules, counted per load).
  size_t bound() const { return slots_.size(); }
  // Entries of the policy whose module was not among those bound (Python
  // entries are always bound).
  size_t unbound_entries() const { return unbound_; }
  size_t python_entries() const { return python_.size(); }

 private:
  struct Slot {
    uint64_t address;
    uint64_t min_bytes;
    uint32_t entry;
    SiteKind kind;
    Path path;
  };
  struct PythonSlot {
    std::string file, function;
    int line;
    uint64_t min_bytes;
    uint32_t entry;
    SiteKind kind;
    Path path;
  };
  bool match_python(SiteKind kind, const PythonFrameName& f, uint64_t bytes, Decision& out) const noexcept;
  std::vector<Slot> slots_;  // sorted by address, then entry index
  std::vector<PythonSlot> python_;
  size_t unbound_ = 0;
};

}  // namespace cuxfer::policy
