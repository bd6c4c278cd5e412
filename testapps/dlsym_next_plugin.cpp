// A plugin that finds definitions the way wrapper libraries do, through
// dlsym(RTLD_NEXT) and dlsym(RTLD_DEFAULT) (plugin_host loads it RTLD_LOCAL;
// tests/e2e/run_compare.py compares its output with and without the shim).
// It links the simulated libcudart, so a name the shim hooks (cudaMalloc) is
// asked for too. For each lookup it prints the file name of the object the
// answer lies in, or "null" and what dlerror() then says; nothing that
// depends on where objects were mapped.
#include <dlfcn.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

namespace {

const char* object_of(void* p) {
  Dl_info info;
  if (!p || !dladdr(p, &info) || !info.dli_fname) return "?";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

void show(const char* what, void* handle, const char* name) {
  dlerror();  // nothing pending before the lookup
  void* p = dlsym(handle, name);
  const char* error = dlerror();
  if (p)
    std::printf("%s %s: %s, dlerror %s\n", what, name, object_of(p), error ? error : "(none)");
  else
    std::printf("%s %s: null, dlerror %s\n", what, name, error ? error : "(none)");
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int dlsym_next_main(int, char**) {
  // Called so that the runtime is linked (and in this plugin's scope).
  if (cudaGetLastError() != cudaSuccess) return 1;
  show("RTLD_NEXT", RTLD_NEXT, "puts");
  show("RTLD_NEXT", RTLD_NEXT, "cuxfer_no_such_symbol");
  show("RTLD_NEXT", RTLD_NEXT, "cudaGetLastError");
  show("RTLD_NEXT", RTLD_NEXT, "cudaMalloc");
  show("RTLD_DEFAULT", RTLD_DEFAULT, "puts");
  show("RTLD_DEFAULT", RTLD_DEFAULT, "cudaGetLastError");
  show("RTLD_DEFAULT", RTLD_DEFAULT, "cuxfer_no_such_symbol");
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  show("libc handle", libc, "cuxfer_no_such_symbol");
  if (libc) dlclose(libc);
  return 0;
}
