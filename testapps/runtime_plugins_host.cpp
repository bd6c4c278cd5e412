// runtime_plugins_host sequential PLUGIN_A PLUGIN_B
// runtime_plugins_host together PLUGIN_A PLUGIN_C
// A host of plugins that each bring their own libcudart (runtime_plugin.cpp),
// loaded with dlopen's default, RTLD_LOCAL.
//
// sequential: A is loaded and copies, then unloaded; its runtime must really
// be gone (the host checks that no object from A's folder is left), and its
// place is taken by an inaccessible mapping, so that a stale pointer into it
// faults instead of landing in B's identical copy by chance; then B (its own
// runtime of the same soname, in another folder) is loaded and copies:
// prints "B: roundtrip ok".
// together: A and C, whose runtimes (different sonames) are loaded at once;
// A copies, C makes an invalid copy and reads its own last error, which must
// be that copy's; A's last error must still be cudaSuccess. Prints
// "C: sticky error ok".
// Exit 0 when every check passed.
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

void* load(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) std::printf("cannot load %s: %s\n", path, dlerror());
  return h;
}

template <typename Fn>
Fn entry(void* plugin, const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(plugin, name));
  if (!fn) std::printf("no %s: %s\n", name, dlerror());
  return fn;
}

std::string folder_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? std::string(path, slash + 1) : std::string("./");
}

// The address ranges of the loaded objects whose path starts with `folder`.
struct Ranges {
  const char* folder;
  std::vector<std::pair<uintptr_t, uintptr_t>> objects;
};

Ranges loaded_from(const std::string& folder) {
  Ranges r{folder.c_str(), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* r = static_cast<Ranges*>(data);
        if (!info->dlpi_name || std::strncmp(info->dlpi_name, r->folder, std::strlen(r->folder)) != 0) return 0;
        uintptr_t lo = UINTPTR_MAX, hi = 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          const uintptr_t at = info->dlpi_addr + ph.p_vaddr;
          if (at < lo) lo = at;
          if (at + ph.p_memsz > hi) hi = at + ph.p_memsz;
        }
        r->objects.emplace_back(lo, hi);
        return 0;
      },
      &r);
  return r;
}

int sequential(const char* a_path, const char* b_path) {
  void* a = load(a_path);
  if (!a) return 1;
  auto a_roundtrip = entry<int (*)(const char*)>(a, "runtime_plugin_roundtrip");
  if (!a_roundtrip || a_roundtrip("A") != 0) return 1;
  const Ranges was = loaded_from(folder_of(a_path));
  if (was.objects.size() < 2) {
    std::printf("A's runtime is not loaded from A's folder (%zu objects there)\n", was.objects.size());
    return 1;
  }
  dlclose(a);
  if (!loaded_from(folder_of(a_path)).objects.empty()) {
    std::printf("A's folder is still loaded after dlclose: the test cannot unload its runtime\n");
    return 1;
  }
  // Where A and its runtime were: nothing readable or executable now.
  const uintptr_t page = 4096;
  for (const auto& [from, to] : was.objects) {
    const uintptr_t lo = from & ~(page - 1), hi = (to + page - 1) & ~(page - 1);
    void* hole = mmap(reinterpret_cast<void*>(lo), hi - lo, PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (hole == MAP_FAILED)
      std::fprintf(stderr, "note: cannot reserve [%#lx, %#lx), where A was: %s\n", static_cast<unsigned long>(lo),
                   static_cast<unsigned long>(hi), std::strerror(errno));
  }
  void* b = load(b_path);
  if (!b) return 1;
  auto b_roundtrip = entry<int (*)(const char*)>(b, "runtime_plugin_roundtrip");
  const int rc = b_roundtrip ? b_roundtrip("B") : 1;
  dlclose(b);
  return rc;
}

int together(const char* a_path, const char* c_path) {
  void* a = load(a_path);
  void* c = load(c_path);
  if (!a || !c) return 1;
  auto a_roundtrip = entry<int (*)(const char*)>(a, "runtime_plugin_roundtrip");
  auto a_last = entry<int (*)()>(a, "runtime_plugin_last_error");
  auto c_roundtrip = entry<int (*)(const char*)>(c, "runtime_plugin_roundtrip");
  auto c_invalid = entry<int (*)(const char*)>(c, "runtime_plugin_invalid_copy");
  if (!a_roundtrip || !a_last || !c_roundtrip || !c_invalid) return 1;
  int rc = a_roundtrip("A") | c_roundtrip("C");
  if (c_invalid("C") != 0) {
    rc = 1;
  } else {
    std::printf("C: sticky error ok\n");
  }
  const int a_error = a_last();
  std::printf("A: last error %d\n", a_error);
  if (a_error != 0) rc = 1;
  dlclose(c);
  dlclose(a);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "sequential") == 0) return sequential(argv[2], argv[3]);
  if (argc == 4 && std::strcmp(argv[1], "together") == 0) return together(argv[2], argv[3]);
  std::fprintf(stderr, "usage: runtime_plugins_host sequential|together PLUGIN PLUGIN\n");
  return 2;
}
