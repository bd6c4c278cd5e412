#include "symbols/bound_definition.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdint>

#include "symbols/symbol_table.h"

namespace cuxfer::shim {
namespace {

#if defined(DLFO_STRUCT_HAS_EH_DBASE)
// glibc's _dl_find_object, looked up rather than linked: a shim built on a
// newer glibc still loads on an older one, which answers through dladdr.
using FindObjectFn = int (*)(void*, dl_find_object*);

FindObjectFn find_object_fn() {
  static std::atomic<uintptr_t> fn{0};  // 0 not looked up yet, 1 absent
  uintptr_t f = fn.load(std::memory_order_acquire);
  if (f == 0) {
    // dlvsym is not interposed: this does not come back into our dlsym.
    f = reinterpret_cast<uintptr_t>(dlvsym(RTLD_DEFAULT, "_dl_find_object", "GLIBC_2.35"));
    if (!f) {
      dlerror();
      f = 1;
    }
    fn.store(f, std::memory_order_release);
  }
  return f == 1 ? nullptr : reinterpret_cast<FindObjectFn>(f);
}
#endif

}  // namespace

const link_map* object_containing(const void* address) {
  if (!address) return nullptr;
#if defined(DLFO_STRUCT_HAS_EH_DBASE)
  if (FindObjectFn find = find_object_fn()) {
    dl_find_object found;
    return find(const_cast<void*>(address), &found) == 0 ? found.dlfo_link_map : nullptr;
  }
#endif
  Dl_info info;
  link_map* m = nullptr;
  return dladdr1(address, &info, reinterpret_cast<void**>(&m), RTLD_DL_LINKMAP) ? m : nullptr;
}

void* global_scope_definition(const char* name) {
  // From the shim, RTLD_DEFAULT searches the global scope from its start and
  // finds what precedes the shim there (the program's own export); the shim's
  // own hook found instead, RTLD_NEXT continues after the shim.
  void* p = real_dlsym(RTLD_DEFAULT, name);
  if (!p || is_own_hook(p)) p = real_dlsym(RTLD_NEXT, name);
  if (is_own_hook(p)) p = nullptr;
  // A miss leaves a message for dlerror(): it is ours, not the app's.
  dlerror();
  return p;
}

void* dependency_scope_definition(const link_map* object, const char* name) {
  if (!object || !object->l_name || !object->l_name[0]) return nullptr;
  // A handle to the loaded object (RTLD_NOLOAD: found by the name it was
  // loaded under, no file opened); dlsym on a handle searches that object and
  // its dependencies, breadth first, as the loader did when binding it.
  void* handle = dlopen(object->l_name, RTLD_LAZY | RTLD_NOLOAD);
  void* p = handle ? real_dlsym(handle, name) : nullptr;
  if (handle) real_dlclose(handle);
  dlerror();
  return is_own_hook(p) ? nullptr : p;
}

}  // namespace cuxfer::shim
