// MappedElf (symbols/file_symbols.h): sections and .symtab read from an
// object's file; and ProgramSymbols (python/program_symbols.h), which reads a
// program that embeds CPython with its symbols hidden. Every malformed file
// reads as "not an ELF" (this binary runs under ASan in CI's sanitizer pass).
#include <gtest/gtest.h>
#include <link.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "python/program_symbols.h"
#include "symbols/file_symbols.h"

// A global of this program: in its .symtab, not in its dynamic symbol table;
// and a local one (internal linkage, an unmangled name) that lookups skip.
extern "C" {
int cuxfer_file_symbols_marker = 7;
__attribute__((used, noinline)) static int cuxfer_file_symbols_local() { return cuxfer_file_symbols_marker; }
}

namespace cuxfer::shim {
namespace {

uint64_t own_bias() {
  uint64_t bias = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        *static_cast<uint64_t*>(out) = info->dlpi_addr;
        return 1;
      },
      &bias);
  return bias;
}

std::string self_path() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class TempFile {
 public:
  explicit TempFile(const std::vector<char>& data)
      : path_(std::filesystem::temp_directory_path() /
              ("cuxfer-file-symbols-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++))) {
    std::ofstream(path_, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const char* path() const { return path_.c_str(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

TEST(MappedElf, FindsThisProgramsSectionsAndItsOwnGlobal) {
  const MappedElf elf(self_path().c_str());
  ASSERT_TRUE(elf.valid());
  uint64_t addr = 0, size = 0;
  EXPECT_TRUE(elf.find_section(".text", addr, size));
  EXPECT_GT(size, 0u);
  EXPECT_FALSE(elf.find_section(".PyRuntime", addr, size));
  ASSERT_TRUE(elf.has_symtab());
  FileSymbol syms[] = {
      {"cuxfer_file_symbols_marker"}, {"no_such_symbol_anywhere"}, {"cuxfer_file_symbols_local"}};
  EXPECT_EQ(elf.lookup_symtab(syms, 3), 1u);
  ASSERT_TRUE(syms[0].found);
  // The address in this process: the file's value plus the load bias (a PIE's is not 0).
  EXPECT_EQ(reinterpret_cast<int*>(own_bias() + syms[0].value), &cuxfer_file_symbols_marker);
  EXPECT_FALSE(syms[1].found);
  EXPECT_FALSE(syms[2].found);  // a local symbol: left out
  EXPECT_EQ(cuxfer_file_symbols_local(), 7);
}

TEST(MappedElf, MalformedFilesAreNotElf) {
  EXPECT_FALSE(MappedElf("/nonexistent/cuxfer/file").valid());
  EXPECT_FALSE(MappedElf("/proc/self").valid());  // a directory
  EXPECT_FALSE(MappedElf(TempFile({}).path()).valid());
  EXPECT_FALSE(MappedElf(TempFile(std::vector<char>(200, 'x')).path()).valid());

  const std::vector<char> whole = bytes_of(self_path());
  ASSERT_GT(whole.size(), 4096u);
  // The first page: a good header whose section headers lie past the end.
  EXPECT_FALSE(MappedElf(TempFile(std::vector<char>(whole.begin(), whole.begin() + 4096)).path()).valid());
  // A section header table that runs one byte past the end of the file.
  {
    std::vector<char> cut(whole.begin(), whole.end() - 1);
    EXPECT_FALSE(MappedElf(TempFile(cut).path()).valid());
  }
  // A 32-bit class, and the section-name table's index out of range.
  {
    std::vector<char> v = whole;
    v[EI_CLASS] = ELFCLASS32;
    EXPECT_FALSE(MappedElf(TempFile(v).path()).valid());
  }
  {
    std::vector<char> v = whole;
    Elf64_Ehdr eh;
    std::memcpy(&eh, v.data(), sizeof eh);
    eh.e_shstrndx = eh.e_shnum;
    std::memcpy(v.data(), &eh, sizeof eh);
    EXPECT_FALSE(MappedElf(TempFile(v).path()).valid());
  }
}

// Sections whose offsets, sizes, name and string-table links point outside
// the file: each is skipped, nothing faults, a good symbol is still found.
TEST(MappedElf, CorruptSectionsAreSkipped) {
  std::vector<char> v = bytes_of(self_path());
  Elf64_Ehdr eh;
  std::memcpy(&eh, v.data(), sizeof eh);
  auto shdr = [&](uint32_t i) {
    return reinterpret_cast<Elf64_Shdr*>(v.data() + eh.e_shoff + i * sizeof(Elf64_Shdr));
  };
  uint32_t corrupted = 0;
  for (uint32_t i = 1; i < eh.e_shnum; ++i) {
    Elf64_Shdr* sh = shdr(i);
    if (i == eh.e_shstrndx || sh->sh_type == SHT_SYMTAB || sh->sh_type == SHT_STRTAB) continue;
    switch (corrupted++ % 3) {
      case 0:
        sh->sh_offset = v.size() - 8, sh->sh_size = 4096;
        break;  // runs past the end
      case 1:
        sh->sh_name = 0xfffffff0u;
        break;  // a name outside the table
      case 2:
        sh->sh_offset = ~0ull - 16, sh->sh_size = 64;
        break;  // would overflow
    }
  }
  ASSERT_GT(corrupted, 3u);
  const MappedElf elf(TempFile(v).path());
  ASSERT_TRUE(elf.valid());
  uint64_t addr = 0, size = 0;
  EXPECT_FALSE(elf.find_section(".no-such-section", addr, size));
  FileSymbol syms[] = {{"cuxfer_file_symbols_marker"}};
  EXPECT_EQ(elf.lookup_symtab(syms, 1), 1u);

  // The symbol table's string table linked to a section that is not there.
  for (uint32_t i = 1; i < eh.e_shnum; ++i)
    if (shdr(i)->sh_type == SHT_SYMTAB) shdr(i)->sh_link = eh.e_shnum + 5;
  const MappedElf unlinked(TempFile(v).path());
  ASSERT_TRUE(unlinked.valid());
  FileSymbol again[] = {{"cuxfer_file_symbols_marker"}};
  EXPECT_EQ(unlinked.lookup_symtab(again, 1), 0u);
}

using python::ProgramPython;
using python::ProgramSymbols;

TEST(ProgramSymbols, AProgramThatEmbedsCPythonWithItsSymbolsHidden) {
  ProgramSymbols p;
  ASSERT_EQ(p.read(CUXFER_FAKE_EMBEDDER, 0x10000), ProgramPython::kSymbols);
  const MappedElf elf(CUXFER_FAKE_EMBEDDER);
  uint64_t section = 0, size = 0;
  ASSERT_TRUE(elf.find_section(".PyRuntime", section, size));
  EXPECT_EQ(reinterpret_cast<uint64_t>(p.find("_PyRuntime")), 0x10000 + section);
  for (const char* name :
       {"Py_IsInitialized", "Py_Version", "PyGILState_GetThisThreadState", "PyInterpreterState_Main",
        "PyCode_Type", "PyUnicode_Type", "PyBytes_Type", "_Py_NoneStruct", "_Py_IsFinalizing"})
    EXPECT_NE(p.find(name), nullptr) << name;
  // Not defined by the program, or not a name the shim looks up.
  EXPECT_EQ(p.find("Py_IsFinalizing"), nullptr);
  EXPECT_EQ(p.find("_Py_NegativeRefcount"), nullptr);
  EXPECT_EQ(p.find("main"), nullptr);
}

TEST(ProgramSymbols, StrippedOrDisagreeingOrNoPython) {
  ProgramSymbols p;
  EXPECT_EQ(p.read(CUXFER_FAKE_EMBEDDER "-stripped", 0), ProgramPython::kStripped);
  EXPECT_EQ(p.find("Py_IsInitialized"), nullptr);
  EXPECT_EQ(p.read(CUXFER_FAKE_EMBEDDER_DISAGREES, 0), ProgramPython::kDisagrees);
  EXPECT_EQ(p.find("Py_IsInitialized"), nullptr);  // nothing of a table not trusted
  EXPECT_EQ(p.read(self_path().c_str(), own_bias()), ProgramPython::kNone);
  EXPECT_EQ(p.read("/nonexistent/program", 0), ProgramPython::kNone);
  EXPECT_EQ(p.read(), ProgramPython::kNone);  // this test program embeds no CPython
}

}  // namespace
}  // namespace cuxfer::shim
