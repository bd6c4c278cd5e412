#include "analyzer/symbolize/symbolizer.h"

#include <cxxabi.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#ifdef CUXFER_HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#endif

namespace cuxfer::symbolize {

const trace::ModuleInfo* find_module(const std::vector<trace::ModuleInfo>& modules, uint64_t address) {
  // Later entries win: a module dlopen'ed after another was unloaded from the
  // same range is recorded after it.
  for (auto it = modules.rbegin(); it != modules.rend(); ++it)
    if (address >= it->low && address < it->high) return &*it;
  return nullptr;
}

namespace {

std::string demangle(const char* raw) {
  if (!raw) return {};
  // Symbol-table names may carry a version: "__libc_start_main@@GLIBC_2.34".
  std::string unversioned(raw);
  if (size_t at = unversioned.find('@'); at != std::string::npos && at > 0) unversioned.resize(at);
  const char* name = unversioned.c_str();
  int status = 0;
  char* out = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string s(out);
  std::free(out);
  return s;
}

// Fills module and offset from the trace's module table; shared by both
// implementations.
Frame locate(const std::vector<trace::ModuleInfo>& modules, uint64_t address,
             const trace::ModuleInfo** where) {
  Frame f;
  f.address = address;
  *where = find_module(modules, address);
  if (*where) {
    f.module = (*where)->path;
    f.offset = address - (*where)->base;
  }
  return f;
}

class ModuleOffsetSymbolizer final : public Symbolizer {
 public:
  explicit ModuleOffsetSymbolizer(std::string note) {
    if (!note.empty()) notes_.push_back(std::move(note));
  }
  Frame resolve(const std::vector<trace::ModuleInfo>& modules, uint64_t address) override {
    const trace::ModuleInfo* m = nullptr;
    return locate(modules, address, &m);
  }
  std::vector<std::string> notes() const override { return notes_; }

 private:
  std::vector<std::string> notes_;
};

#ifdef CUXFER_HAVE_LIBDW

std::string hex(const unsigned char* p, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

// The innermost function at `pc` when it was inlined into the symbol that
// contains it: the source line at `pc` belongs to the inlined function, so
// the name shown must be that one too. Empty when not inlined or no DWARF.
std::string inlined_function(Dwfl_Module* module, Dwarf_Addr pc) {
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = dwfl_module_addrdie(module, pc, &bias);
  if (!cu) return {};
  Dwarf_Die* scopes = nullptr;
  int n = dwarf_getscopes(cu, pc - bias, &scopes);
  std::string name;
  for (int i = 0; i < n && name.empty(); ++i) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_subprogram) break;  // not inlined: the symbol table names it
    if (tag != DW_TAG_inlined_subroutine) continue;
    Dwarf_Attribute attr;
    for (int at : {DW_AT_linkage_name, DW_AT_MIPS_linkage_name, DW_AT_name})
      if (dwarf_attr_integrate(&scopes[i], at, &attr))
        if (const char* s = dwarf_formstring(&attr)) {
          name = at == DW_AT_name ? std::string(s) : demangle(s);
          break;
        }
  }
  std::free(scopes);
  return name;
}

// One Dwfl session per distinct object file, reported at bias 0 so that the
// same library loaded at different addresses in different processes (ranks,
// fork children) is parsed once and looked up by file offset.
class DwflSymbolizer final : public Symbolizer {
 public:
  explicit DwflSymbolizer(std::string sysroot) : sysroot_(std::move(sysroot)) {}
  ~DwflSymbolizer() override {
    for (auto& [key, obj] : objects_)
      if (obj.dwfl) dwfl_end(obj.dwfl);
  }

  Frame resolve(const std::vector<trace::ModuleInfo>& modules, uint64_t address) override {
    const trace::ModuleInfo* m = nullptr;
    Frame f = locate(modules, address, &m);
    if (!m) return f;
    Object& obj = open(*m);
    if (!obj.module) return f;
    auto key = std::make_pair(&obj, f.offset);
    if (auto hit = cache_.find(key); hit != cache_.end()) {
      Frame cached = hit->second;
      cached.address = address;
      return cached;
    }
    // A return address points after the call; the call itself is one byte back.
    Dwarf_Addr pc = f.offset > 0 ? f.offset - 1 : 0;
    f.function = inlined_function(obj.module, pc);
    if (f.function.empty()) f.function = demangle(dwfl_module_addrname(obj.module, pc));
    if (Dwfl_Line* line = dwfl_module_getsrc(obj.module, pc)) {
      int lineno = 0;
      if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
        f.file = file;
        f.line = lineno;
      }
    }
    cache_.emplace(key, f);
    return f;
  }

  std::vector<std::string> notes() const override { return notes_; }

 private:
  struct Object {
    Dwfl* dwfl = nullptr;
    Dwfl_Module* module = nullptr;
  };

  Object& open(const trace::ModuleInfo& m) {
    auto [it, inserted] = objects_.try_emplace({m.path, m.build_id});
    Object& obj = it->second;
    if (!inserted) return obj;
    static char* debuginfo_path = nullptr;
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = &debuginfo_path,
    };
    obj.dwfl = dwfl_begin(&callbacks);
    if (!obj.dwfl) return obj;
    dwfl_report_begin(obj.dwfl);
    std::string file = m.path;
    if (!sysroot_.empty() && ::access((sysroot_ + m.path).c_str(), R_OK) == 0) file = sysroot_ + m.path;
    Dwfl_Module* mod = dwfl_report_elf(obj.dwfl, m.path.c_str(), file.c_str(), -1, 0, false);
    dwfl_report_end(obj.dwfl, nullptr, nullptr);
    if (!mod) {
      note(m.path, fmt::format("symbols unavailable for {}: {}; call sites in it are shown as "
                               "module+offset",
                               m.path, dwfl_errmsg(-1)));
      return obj;
    }
    if (!m.build_id.empty()) {
      const unsigned char* bits = nullptr;
      GElf_Addr vaddr = 0;
      int n = dwfl_module_build_id(mod, &bits, &vaddr);
      if (n > 0 && hex(bits, n) != m.build_id) {
        note(m.path, fmt::format("symbols unavailable for {}: the file changed since the trace "
                                 "was recorded (build id differs); call sites in it are shown as "
                                 "module+offset",
                                 m.path));
        return obj;
      }
    }
    obj.module = mod;
    return obj;
  }

  void note(const std::string& path, std::string line) {
    if (noted_.insert(path).second) notes_.push_back(std::move(line));
  }

  std::string sysroot_;
  std::map<std::pair<std::string, std::string>, Object> objects_;
  std::map<std::pair<const Object*, uint64_t>, Frame> cache_;
  std::set<std::string> noted_;
  std::vector<std::string> notes_;
};

#endif  // CUXFER_HAVE_LIBDW

}  // namespace

std::unique_ptr<Symbolizer> make_symbolizer(bool enabled, std::string sysroot) {
  if (!enabled) return std::make_unique<ModuleOffsetSymbolizer>("");
#ifdef CUXFER_HAVE_LIBDW
  return std::make_unique<DwflSymbolizer>(std::move(sysroot));
#else
  (void)sysroot;
  return std::make_unique<ModuleOffsetSymbolizer>(
      "this cuxfer was built without libdw (elfutils): call sites are shown as module+offset");
#endif
}

}  // namespace cuxfer::symbolize
