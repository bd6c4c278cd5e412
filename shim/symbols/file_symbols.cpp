#include "symbols/file_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace cuxfer::shim {

namespace {

// Whether [offset, offset + count * entry) lies inside a file of `size` bytes, without overflow.
bool inside(uint64_t offset, uint64_t count, uint64_t entry, size_t size) {
  if (offset > size) return false;
  if (entry != 0 && count > (size - offset) / entry) return false;
  return true;
}

template <typename T>
T read_at(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // the map is page-aligned; entries inside it need not be
  return v;
}

}  // namespace

MappedElf::MappedElf(const char* path) noexcept {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    return;
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) return;
  map_ = static_cast<const unsigned char*>(m);
  size_ = static_cast<size_t>(st.st_size);
  mapped_ = true;
  parse();
}

MappedElf::MappedElf(const unsigned char* data, size_t size) noexcept : map_(data), size_(data ? size : 0) {
  parse();
}

void MappedElf::parse() noexcept {
  if (size_ < sizeof(Elf64_Ehdr)) return;
  const auto eh = read_at<Elf64_Ehdr>(map_);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 ||
      eh.e_shstrndx >= eh.e_shnum || !inside(eh.e_shoff, eh.e_shnum, sizeof(Elf64_Shdr), size_))
    return;
  shdrs_ = map_ + eh.e_shoff;
  shnum_ = eh.e_shnum;
  shstrndx_ = eh.e_shstrndx;
}

MappedElf::~MappedElf() {
  if (mapped_) ::munmap(const_cast<unsigned char*>(map_), size_);
}

const unsigned char* MappedElf::section_data(uint32_t index, uint64_t& size) const noexcept {
  if (index >= shnum_) return nullptr;
  const auto sh = read_at<Elf64_Shdr>(shdrs_ + index * sizeof(Elf64_Shdr));
  if (sh.sh_type == SHT_NOBITS || !inside(sh.sh_offset, sh.sh_size, 1, size_)) return nullptr;
  size = sh.sh_size;
  return map_ + sh.sh_offset;
}

const char* MappedElf::section_name(uint32_t index) const noexcept {
  uint64_t names_size = 0;
  const unsigned char* names = section_data(shstrndx_, names_size);
  if (!names) return nullptr;
  const auto sh = read_at<Elf64_Shdr>(shdrs_ + index * sizeof(Elf64_Shdr));
  if (sh.sh_name >= names_size) return nullptr;
  const char* name = reinterpret_cast<const char*>(names + sh.sh_name);
  // NUL-terminated inside the table, or no name.
  return std::memchr(name, 0, names_size - sh.sh_name) ? name : nullptr;
}

bool MappedElf::find_section(const char* name, uint64_t& addr, uint64_t& size) const noexcept {
  for (uint32_t i = 0; i < shnum_; ++i) {
    const char* n = section_name(i);
    if (!n || std::strcmp(n, name) != 0) continue;
    const auto sh = read_at<Elf64_Shdr>(shdrs_ + i * sizeof(Elf64_Shdr));
    addr = sh.sh_addr;
    size = sh.sh_size;
    return true;
  }
  return false;
}

bool MappedElf::has_symtab() const noexcept {
  for (uint32_t i = 0; i < shnum_; ++i)
    if (read_at<Elf64_Shdr>(shdrs_ + i * sizeof(Elf64_Shdr)).sh_type == SHT_SYMTAB) return true;
  return false;
}

size_t MappedElf::lookup_symtab(FileSymbol* syms, size_t n) const noexcept {
  size_t found = 0;
  for (uint32_t i = 0; i < shnum_ && found < n; ++i) {
    const auto sh = read_at<Elf64_Shdr>(shdrs_ + i * sizeof(Elf64_Shdr));
    if (sh.sh_type != SHT_SYMTAB || sh.sh_entsize != sizeof(Elf64_Sym)) continue;
    uint64_t table_size = 0, strings_size = 0;
    const unsigned char* table = section_data(i, table_size);
    const unsigned char* strings = section_data(sh.sh_link, strings_size);
    if (!table || !strings || strings_size == 0) continue;
    const uint64_t count = table_size / sizeof(Elf64_Sym);
    for (uint64_t k = 0; k < count && found < n; ++k) {
      const auto sym = read_at<Elf64_Sym>(table + k * sizeof(Elf64_Sym));
      const unsigned bind = ELF64_ST_BIND(sym.st_info);
      if ((bind != STB_GLOBAL && bind != STB_WEAK) || sym.st_shndx == SHN_UNDEF ||
          sym.st_name >= strings_size)
        continue;
      const char* name = reinterpret_cast<const char*>(strings + sym.st_name);
      const size_t room = strings_size - sym.st_name;
      for (size_t s = 0; s < n; ++s) {
        if (syms[s].found || name[0] != syms[s].name[0]) continue;
        const size_t len = std::strlen(syms[s].name);
        // The name, then its NUL, both inside the string table.
        if (len < room && std::memcmp(name, syms[s].name, len + 1) == 0) {
          syms[s].value = sym.st_value;
          syms[s].found = true;
          ++found;
          break;
        }
      }
    }
  }
  return found;
}

}  // namespace cuxfer::shim
