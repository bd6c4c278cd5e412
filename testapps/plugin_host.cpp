// plugin_host PLUGIN ENTRY [ARGS...]
// A program whose CUDA work lives in a plugin: it loads PLUGIN (a path, or a
// file name beside this program) with dlopen's default, RTLD_LOCAL, so the
// loader keeps the plugin and what it links (libcudart.so, libpython3.X.so)
// out of the global scope; calls its `int ENTRY(int argc, char** argv)`
// with argv = {PLUGIN, ARGS...}; then unloads it, as a host does when the
// plugin's work is done, and exits with ENTRY's status. A Python extension
// module is loaded the same way. Traffic: the plugin's.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: plugin_host PLUGIN ENTRY [ARGS...]\n");
    return 2;
  }
  std::string path = argv[1];
  if (path.find('/') == std::string::npos) {
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
      std::fprintf(stderr, "plugin_host: cannot read /proc/self/exe\n");
      return 1;
    }
    const std::string self(exe, static_cast<size_t>(n));
    path = self.substr(0, self.rfind('/') + 1) + path;
  }
  void* plugin = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!plugin) {
    std::fprintf(stderr, "plugin_host: %s\n", dlerror());
    return 1;
  }
  auto entry = reinterpret_cast<int (*)(int, char**)>(dlsym(plugin, argv[2]));
  if (!entry) {
    std::fprintf(stderr, "plugin_host: %s\n", dlerror());
    return 1;
  }
  std::vector<char*> args = {argv[1]};
  for (int i = 3; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  const int rc = entry(static_cast<int>(args.size()) - 1, args.data());
  dlclose(plugin);
  return rc;
}
