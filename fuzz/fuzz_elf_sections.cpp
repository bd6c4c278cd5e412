// Fuzzes MappedElf (shim/symbols/file_symbols.h), which the shim runs on the
// program's own file to find an interpreter it hides (a .PyRuntime section,
// names in .symtab). A file is whatever is on disk: truncated, corrupt, or
// not ELF at all must read as "not an ELF" or as sections skipped, never as
// a read outside it.
//
// The input's first byte chooses how it is read. Even: the input is the file.
// Odd: the input after three bytes becomes the section header table and the
// data behind a valid 64-bit header (byte 1: how many sections, byte 2: which
// one names the others), so that mutations spend their time in offsets,
// sizes, names and symbols rather than in the header's magic.
#include <elf.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "symbols/file_symbols.h"

namespace {

using cuxfer::shim::FileSymbol;
using cuxfer::shim::MappedElf;

void read_all(const unsigned char* data, size_t size) {
  const MappedElf elf(data, size);
  if (!elf.valid()) return;
  uint64_t addr = 0, length = 0;
  elf.find_section(".PyRuntime", addr, length);
  elf.find_section(".text", addr, length);
  elf.has_symtab();
  FileSymbol syms[] = {{"Py_IsInitialized"}, {"_PyRuntime"}, {"PyCode_Type"}, {"a"}, {""}};
  elf.lookup_symtab(syms, sizeof syms / sizeof syms[0]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if ((data[0] & 1) == 0) {
    read_all(data + 1, size - 1);
    return 0;
  }
  if (size < 3) return 0;
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<uint16_t>(data[1] % 32 + 1);
  eh.e_shstrndx = static_cast<uint16_t>(data[2] % (eh.e_shnum + 1));  // one past: out of range
  eh.e_shoff = sizeof eh;
  std::vector<unsigned char> file(sizeof eh + size - 3);
  std::memcpy(file.data(), &eh, sizeof eh);
  std::memcpy(file.data() + sizeof eh, data + 3, size - 3);
  read_all(file.data(), file.size());
  return 0;
}
