#include "python/program_symbols.h"

#include <link.h>

#include <cstring>

namespace cuxfer::shim::python {

namespace {

// The main program's load bias: dl_iterate_phdr reports it first.
uint64_t program_bias() {
  uint64_t bias = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<uint64_t*>(out) = info->dlpi_addr;
        return 1;  // the first object only
      },
      &bias);
  return bias;
}

}  // namespace

ProgramPython ProgramSymbols::read() noexcept { return read("/proc/self/exe", program_bias()); }

ProgramPython ProgramSymbols::read(const char* path, uint64_t bias) noexcept {
  state_ = ProgramPython::kNone;
  bias_ = bias;
  for (size_t i = 0; i < kCount; ++i) symbols_[i] = FileSymbol{kNames[i], 0, false};
  const MappedElf elf(path);
  uint64_t section_addr = 0, section_size = 0;
  if (!elf.valid() || !elf.find_section(".PyRuntime", section_addr, section_size)) return state_;
  if (elf.lookup_symtab(symbols_, kCount) == 0) return state_ = ProgramPython::kStripped;  // no .symtab: none
  // _PyRuntime is what the section holds: a table whose _PyRuntime lies
  // elsewhere is not this program's (or not what it seems), and is not used.
  const FileSymbol* runtime = nullptr;
  for (const FileSymbol& sym : symbols_)
    if (std::strcmp(sym.name, "_PyRuntime") == 0) runtime = &sym;
  if (!runtime || !runtime->found || runtime->value != section_addr)
    return state_ = ProgramPython::kDisagrees;
  return state_ = ProgramPython::kSymbols;
}

void* ProgramSymbols::find(const char* name) const noexcept {
  if (state_ != ProgramPython::kSymbols) return nullptr;
  for (const FileSymbol& s : symbols_)
    if (s.found && std::strcmp(s.name, name) == 0) return reinterpret_cast<void*>(bias_ + s.value);
  return nullptr;
}

}  // namespace cuxfer::shim::python
