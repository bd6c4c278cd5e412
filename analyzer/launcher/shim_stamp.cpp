#include "analyzer/launcher/shim_stamp.h"

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace cuxfer::launcher {
namespace {

// pread of exactly `n` bytes at `off`.
bool read_at(int fd, void* buf, size_t n, uint64_t off) {
  auto* p = static_cast<char*>(buf);
  while (n) {
    ssize_t r = ::pread(fd, p, n, static_cast<off_t>(off));
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    off += static_cast<uint64_t>(r);
  }
  return true;
}

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

ShimStamp read_shim_stamp(const std::string& path) {
  ShimStamp s;
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) {
    s.error = std::string("cannot open it: ") + std::strerror(errno);
    return s;
  }
  Elf64_Ehdr eh{};
  if (!read_at(f.fd, &eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64) {
    s.error = "not a 64-bit ELF library";
    return s;
  }
  // Bounded: a real library has tens of sections; this is not a fuzz target
  // but must not allocate without limit on a strange file.
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096 || eh.e_shstrndx >= eh.e_shnum) {
    s.error = "its section table is missing or malformed";
    return s;
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!read_at(f.fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff)) {
    s.error = "its section table is cut short";
    return s;
  }
  const Elf64_Shdr& strtab = sh[eh.e_shstrndx];
  if (strtab.sh_size > (1u << 20)) {
    s.error = "its section names are malformed";
    return s;
  }
  std::vector<char> names(strtab.sh_size + 1, '\0');
  if (!read_at(f.fd, names.data(), strtab.sh_size, strtab.sh_offset)) {
    s.error = "its section names are cut short";
    return s;
  }
  for (const Elf64_Shdr& h : sh) {
    if (h.sh_name >= strtab.sh_size || std::strcmp(names.data() + h.sh_name, kShimStampSection) != 0) continue;
    if (h.sh_size > 4096 || h.sh_type == SHT_NOBITS) break;
    std::string text(h.sh_size, '\0');
    if (!read_at(f.fd, text.data(), text.size(), h.sh_offset)) break;
    text.resize(std::strlen(text.c_str()));
    if (text.rfind(kShimStampPrefix, 0) != 0) break;
    s.build_id = text.substr(std::strlen(kShimStampPrefix));
    s.ok = !s.build_id.empty();
    if (!s.ok) s.error = "its build stamp is empty";
    return s;
  }
  s.error = "it carries no cuxfer build stamp (not a libcuxfer.so, or one older than 0.1.0)";
  return s;
}

std::string shim_mismatch(const std::string& shim_path, const ShimStamp& stamp, const std::string& self_id) {
  if (!stamp.ok) return "the shim " + shim_path + " cannot be used: " + stamp.error + "; this cuxfer is " + self_id;
  if (stamp.build_id == self_id) return {};
  return "the shim " + shim_path + " is from cuxfer " + stamp.build_id + ", this cuxfer is " + self_id +
         ": install both from one build (pip install --force-reinstall of the same wheel, or rebuild the cuxfer target)";
}

}  // namespace cuxfer::launcher
