// What an object keeps only in its file: its section headers and its
// .symtab, which the loader never maps. A program that links a library in
// without exporting it (CPython embedded from libpython3.X.a, linked without
// --export-dynamic) hides that library's symbols from dlsym and from
// elf_lookup.h; its file's symbol table still names them unless the program
// was stripped.
//
// MappedElf maps the file read-only and checks every offset it follows
// against the file's size: a truncated, corrupt or non-ELF file reads as
// "not an ELF", never a fault. Nothing here allocates; callers are cold
// paths (once per process), the file is unmapped when the object goes.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cuxfer::shim {

// A name to look up, and what the symbol table says of it: the symbol's
// st_value (its address in the file's view: add the object's load bias).
struct FileSymbol {
  const char* name = nullptr;
  uint64_t value = 0;
  bool found = false;
};

class MappedElf {
 public:
  // Maps `path`; valid() is false when it cannot be opened, mapped, or is no
  // 64-bit little-endian ELF file with section headers inside the file.
  explicit MappedElf(const char* path) noexcept;
  // The same over bytes already in memory (not owned; for tests and the
  // fuzzer, fuzz/fuzz_elf_sections.cpp).
  MappedElf(const unsigned char* data, size_t size) noexcept;
  ~MappedElf();
  MappedElf(const MappedElf&) = delete;
  MappedElf& operator=(const MappedElf&) = delete;

  bool valid() const noexcept { return shdrs_ != nullptr; }

  // Whether a section named `name` exists; its address (sh_addr) and size.
  bool find_section(const char* name, uint64_t& addr, uint64_t& size) const noexcept;

  // Whether the file has a .symtab (a stripped file has none).
  bool has_symtab() const noexcept;

  // Fills each of syms[0, n) from a defined STB_GLOBAL or STB_WEAK entry of
  // .symtab of that name (local symbols are left out: two files' statics may
  // share a name). Returns how many were found.
  size_t lookup_symtab(FileSymbol* syms, size_t n) const noexcept;

 private:
  const unsigned char* section_data(uint32_t index, uint64_t& size) const noexcept;
  const char* section_name(uint32_t index) const noexcept;

  void parse() noexcept;  // sets shdrs_ and the counts when map_[0, size_) is a usable ELF

  const unsigned char* map_ = nullptr;
  size_t size_ = 0;
  bool mapped_ = false;                   // map_ is this object's mapping of a file
  const unsigned char* shdrs_ = nullptr;  // the section header table, inside the map
  uint32_t shnum_ = 0;
  uint32_t shstrndx_ = 0;
};

}  // namespace cuxfer::shim
