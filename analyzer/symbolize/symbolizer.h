// Offline symbolization of captured return addresses. The trace records each
// loaded object's path, load bias and build id; the symbolizer opens those
// files after the fact (elfutils libdwfl) and names functions and source lines.
// Nothing here reads the traced process's memory: it may be long gone.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "analyzer/symbolize/frame.h"
#include "trace/records.h"

namespace cuxfer::symbolize {

class Symbolizer {
 public:
  virtual ~Symbolizer() = default;
  // Resolves one return address captured in a process whose loaded objects
  // were `modules`. Never fails: what cannot be named is left empty.
  virtual Frame resolve(const std::vector<trace::ModuleInfo>& modules, uint64_t address) = 0;
  // One line per problem met (a module whose file is gone or changed, no
  // libdw), each said once.
  virtual std::vector<std::string> notes() const = 0;
};

// The elfutils symbolizer when cuxfer was built with libdw, else one that
// names frames module+offset and says why. `enabled` false gives the latter
// without the note (for --no-symbols).
// `sysroot`, when set, is tried first as a prefix of every recorded module
// path (traces from another machine: copy its binaries under DIR keeping
// their paths); the build id still decides whether a file is the right one.
std::unique_ptr<Symbolizer> make_symbolizer(bool enabled = true, std::string sysroot = {});

// The module containing `address`, or null.
const trace::ModuleInfo* find_module(const std::vector<trace::ModuleInfo>& modules, uint64_t address);

}  // namespace cuxfer::symbolize
