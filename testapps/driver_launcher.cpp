// The executable of a driver-API app linked against the real libcuda (the
// <app>-cuda builds of cuxfer_driver_testapp(... LINK_DRIVER)).
//
// An executable that names libcuda.so.1 as a dependency cannot even start
// where there is no driver: the loader fails (exit 127) before main could say
// "no GPU" and skip. So the app itself is a library, lib<app>-cuda-body.so,
// linked against libcuda as the executable was (its calls reach the driver
// through its PLT, where the preloaded shim interposes them), its main
// compiled as testapp_body_main and entered through testapp_body_main_c
// (driver_body_entry.cpp); this launcher, which needs nothing of CUDA, loads
// libcuda.so.1 first and, where it cannot, says "no GPU" and exits 77 (the
// skip code of every GPU test); then loads the body beside it and runs it.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>

#ifndef TESTAPP_BODY
#error "TESTAPP_BODY (the body library's file name) must be defined"
#endif

namespace {
constexpr int kSkip = 77;

// The directory this executable lies in.
std::string own_directory() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return ".";
  std::string p(path, static_cast<size_t>(n));
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}
}  // namespace

int main(int argc, char** argv) {
  const char* app = argc > 0 && argv[0] ? argv[0] : TESTAPP_BODY;
  if (const char* slash = std::strrchr(app, '/')) app = slash + 1;
  if (!dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
    const char* why = dlerror();
    std::printf("%s: no GPU (libcuda.so.1 cannot be loaded: %s): skipping\n", app, why ? why : "?");
    std::fflush(stdout);
    return kSkip;
  }
  const std::string body = own_directory() + "/" + TESTAPP_BODY;
  void* h = dlopen(body.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    std::fprintf(stderr, "%s: cannot load %s: %s\n", app, body.c_str(), why ? why : "?");
    return 1;
  }
  using Main = int (*)(int, char**);
  auto body_main = reinterpret_cast<Main>(dlsym(h, "testapp_body_main_c"));
  if (!body_main) {
    std::fprintf(stderr, "%s: %s has no testapp_body_main_c\n", app, body.c_str());
    return 1;
  }
  return body_main(argc, argv);
}
