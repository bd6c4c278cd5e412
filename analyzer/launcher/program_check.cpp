#include "analyzer/launcher/program_check.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace cuxfer::launcher {
namespace {

bool is_executable_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// Reads exactly `n` bytes at `offset`; false on a short read.
bool read_at(int fd, void* buf, size_t n, off_t offset) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, n, offset);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    offset += r;
  }
  return true;
}

// -1: could not tell; 0: no PT_INTERP; 1: has one.
template <typename Ehdr, typename Phdr>
int has_interpreter(int fd) {
  Ehdr eh{};
  if (!read_at(fd, &eh, sizeof eh, 0) || eh.e_phentsize != sizeof(Phdr) || eh.e_phnum == 0 ||
      eh.e_phnum > 4096)
    return -1;
  std::vector<Phdr> ph(eh.e_phnum);
  if (!read_at(fd, ph.data(), ph.size() * sizeof(Phdr), static_cast<off_t>(eh.e_phoff))) return -1;
  for (const auto& p : ph)
    if (p.p_type == PT_INTERP) return 1;
  return 0;
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string real_path(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

// The words of a script's "#!" line (interpreter first), empty for any other file.
std::vector<std::string> shebang_words(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[256] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  ::close(fd);
  if (n < 2 || buf[0] != '#' || buf[1] != '!') return {};
  std::string_view line(buf + 2, static_cast<size_t>(n) - 2);
  line = line.substr(0, line.find('\n'));
  std::vector<std::string> words;
  for (size_t at = 0; at < line.size();) {
    const size_t start = line.find_first_not_of(" \t", at);
    if (start == std::string_view::npos) break;
    const size_t end = std::min(line.find_first_of(" \t", start), line.size());
    words.emplace_back(line.substr(start, end - start));
    at = end;
  }
  return words;
}

// The program a "#!" line runs: its interpreter, or for "#!/usr/bin/env
// [-S] [VAR=value...] NAME" the NAME that env looks up.
std::string script_interpreter(const std::vector<std::string>& words, const char* path_env) {
  if (words.empty()) return {};
  if (base_name(words[0]) != "env") return words[0];
  for (size_t i = 1; i < words.size(); ++i)
    if (words[i][0] != '-' && words[i].find('=') == std::string::npos) {
      ResolvedProgram r = resolve_program(words[i], path_env);
      return r.result == ResolvedProgram::Result::Found ? r.path : std::string();
    }
  return {};
}

void add_name(std::vector<std::string>& names, const std::string& name) {
  if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}


// The file offset of virtual address `vaddr`, from the PT_LOAD segments; -1 if none holds it.
off_t file_offset(const std::vector<Elf64_Phdr>& ph, uint64_t vaddr) {
  for (const auto& p : ph)
    if (p.p_type == PT_LOAD && vaddr >= p.p_vaddr && vaddr - p.p_vaddr < p.p_filesz)
      return static_cast<off_t>(p.p_offset + (vaddr - p.p_vaddr));
  return -1;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

std::vector<std::string> programs_named(const std::vector<std::string>& command, const char* path_env) {
  std::vector<std::string> names;
  for (const std::string& word : command) {
    if (word.empty() || word.back() == '/') continue;
    add_name(names, base_name(word));
    const ResolvedProgram found = resolve_program(word, path_env);
    if (found.result != ResolvedProgram::Result::Found) continue;
    add_name(names, base_name(real_path(found.path)));
    const std::string interpreter = script_interpreter(shebang_words(found.path), path_env);
    if (interpreter.empty()) continue;
    add_name(names, base_name(interpreter));
    add_name(names, base_name(real_path(interpreter)));
  }
  return names;
}

std::vector<std::string> needed_libraries(const std::string& path) {
  std::vector<std::string> out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  Elf64_Ehdr eh{};
  std::vector<Elf64_Phdr> ph;
  std::vector<Elf64_Dyn> dyn;
  uint64_t strtab = 0, strsz = 0;
  const bool ok = read_at(fd, &eh, sizeof eh, 0) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
                  eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum > 0 &&
                  eh.e_phnum <= 4096;
  if (ok) {
    ph.resize(eh.e_phnum);
    if (!read_at(fd, ph.data(), ph.size() * sizeof(Elf64_Phdr), static_cast<off_t>(eh.e_phoff))) ph.clear();
  }
  for (const auto& p : ph) {
    if (p.p_type != PT_DYNAMIC || p.p_filesz == 0 || p.p_filesz > (1u << 20)) continue;
    dyn.resize(p.p_filesz / sizeof(Elf64_Dyn));
    if (!read_at(fd, dyn.data(), dyn.size() * sizeof(Elf64_Dyn), static_cast<off_t>(p.p_offset))) dyn.clear();
    break;
  }
  for (const auto& d : dyn) {
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
  }
  const off_t strings = strtab ? file_offset(ph, strtab) : -1;
  if (strings >= 0 && strsz > 0 && strsz <= (16u << 20)) {
    std::string table(strsz, '\0');
    if (read_at(fd, table.data(), table.size(), strings)) {
      for (const auto& d : dyn) {
        if (d.d_tag == DT_NULL) break;
        if (d.d_tag == DT_NEEDED && d.d_un.d_val < table.size()) out.emplace_back(table.c_str() + d.d_un.d_val);
      }
    }
  }
  ::close(fd);
  return out;
}

std::string runtime_needing_first_place(const std::vector<std::string>& needed) {
  for (const std::string& name : needed) {
    const std::string_view base = std::string_view(name).substr(name.rfind('/') + 1);
    if (starts_with(base, "libasan.so") || starts_with(base, "libhwasan.so") ||
        starts_with(base, "libclang_rt.asan-") || starts_with(base, "libclang_rt.hwasan-"))
      return name;
  }
  return {};
}

ResolvedProgram resolve_program(const std::string& name, const char* path_env) {
  ResolvedProgram r;
  if (name.empty()) return r;
  if (name.find('/') != std::string::npos) {
    r.path = name;
    r.result = is_executable_file(name) ? ResolvedProgram::Result::Found
               : exists(name)           ? ResolvedProgram::Result::NotExecutable
                                        : ResolvedProgram::Result::NotFound;
    return r;
  }
  std::string_view dirs = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    size_t colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    std::string candidate = dir.empty() ? name : std::string(dir) + "/" + name;
    if (is_executable_file(candidate)) {
      r.path = candidate;
      r.result = ResolvedProgram::Result::Found;
      return r;
    }
    if (exists(candidate) && r.result == ResolvedProgram::Result::NotFound) {
      r.path = candidate;
      r.result = ResolvedProgram::Result::NotExecutable;
    }
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return r;
}

PreloadCheck check_preloadable(const std::string& path) {
  PreloadCheck c;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return c;
  // Secure-execution mode (and so an ignored LD_PRELOAD) comes from a set-id
  // bit that changes who we run as; set-id to ourselves changes nothing.
  if ((st.st_mode & S_ISUID) && st.st_uid != ::geteuid()) {
    c.ok = false;
    c.reason = "is setuid: the dynamic loader ignores LD_PRELOAD for it, so it cannot be traced";
    return c;
  }
  if ((st.st_mode & S_ISGID) && st.st_gid != ::getegid()) {
    c.ok = false;
    c.reason = "is setgid: the dynamic loader ignores LD_PRELOAD for it, so it cannot be traced";
    return c;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return c;  // execute-only file: let exec decide
  unsigned char ident[EI_NIDENT] = {};
  int interp = -1;
  if (read_at(fd, ident, sizeof ident, 0) && std::memcmp(ident, ELFMAG, SELFMAG) == 0) {
    if (ident[EI_CLASS] == ELFCLASS64)
      interp = has_interpreter<Elf64_Ehdr, Elf64_Phdr>(fd);
    else if (ident[EI_CLASS] == ELFCLASS32 && sizeof(void*) == 8) {
      ::close(fd);
      c.ok = false;
      c.reason = "is a 32-bit program: the cuxfer shim is 64-bit and cannot be preloaded into it";
      return c;
    }
  }
  ::close(fd);
  if (interp == 0) {
    c.ok = false;
    c.reason = "is statically linked: there is no dynamic loader to preload the cuxfer shim";
  }
  return c;
}

}  // namespace cuxfer::launcher
