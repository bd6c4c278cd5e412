// The two doors through which CUDA code finds driver functions without the PLT:
// dlsym on the libcuda handle (JAX/XLA, CuPy, Triton) and cuGetProcAddress
// (static and shared cudart, including cudart asking cuGetProcAddress for
// itself). Both hand out our hook where the name is interposed and remember
// the real function behind it. (The exported dlsym is dlsym_entry.cpp's: it
// comes here only for a name the shim hooks; glibc answers every other.)
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>

#include "core/config.h"
#include "core/export.h"
#include "core/log.h"
#include "symbols/cuda_headers.h"
#include "interpose/cupti_hooks.h"
#include "interpose/hook_macros.h"
#include "interpose/lookup_hooks.h"
#include "symbols/symbol_table.h"

namespace cuxfer::shim {
namespace {

// cuGetProcAddress returned `fn` for `symbol`: if it is the driver's export of
// one of our interposed variants, return our hook for that exact variant (so
// the version and per-thread-stream choice the driver made is kept).
void* substitute(const char* symbol, void* fn) {
  // A driver whose own references bind to our exports hands out our hooks
  // already; their real functions are found by name.
  if (is_own_hook(fn)) return fn;
  for (size_t i = 0; i < kHookCount; ++i) {
    auto id = static_cast<HookId>(i);
    const HookEntry& e = hook_entry(id);
    if (e.layer != Layer::Driver || std::strcmp(e.base, symbol) != 0) continue;
    if (exported_by_libcuda(id) == fn) {
      remember_real(id, fn);
      return e.hook;
    }
  }
  if (find_hook(symbol) || std::strcmp(symbol, "cuMemcpy") == 0) {
    static std::atomic<bool> warned{false};
    log::warn_once(warned, std::string("cuGetProcAddress(\"") + symbol +
                               "\") returned a function cuxfer does not know; passing it through");
  }
  return fn;
}

void* maybe_substitute(const char* symbol, void* fn) {
  if (!fn || !symbol || symbol[0] != 'c' || symbol[1] != 'u' || !config().enabled) return fn;
  return substitute(symbol, fn);
}

}  // namespace

void* find_next_definition(const void* caller, const char* name, const void* self) {
  Dl_info info;
  link_map* caller_map = nullptr;
  if (dladdr1(caller, &info, reinterpret_cast<void**>(&caller_map), RTLD_DL_LINKMAP) && caller_map) {
    // The caller's own lookup scope: itself and its dependencies, which is
    // what its PLT would have bound to without us (the main program's scope
    // also holds the preloads, so our own definition is skipped).
    void* h = dlopen(caller_map->l_name && caller_map->l_name[0] ? caller_map->l_name : nullptr,
                     RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      void* p = real_dlsym(h, name);
      dlclose(h);
      if (p && p != self) return p;
    }
  }
  // Otherwise the first object in load order that defines it, other than us.
  Dl_info self_info;
  link_map* self_map = nullptr;
  dladdr1(self, &self_info, reinterpret_cast<void**>(&self_map), RTLD_DL_LINKMAP);
  link_map* head = caller_map ? caller_map : self_map;
  while (head && head->l_prev) head = head->l_prev;
  for (link_map* m = head; m; m = m->l_next) {
    if (m == self_map) continue;
    void* h = dlopen(m->l_name && m->l_name[0] ? m->l_name : nullptr, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    void* p = real_dlsym(h, name);
    dlclose(h);
    Dl_info pi;
    link_map* owner = nullptr;
    if (p && p != self && dladdr1(p, &pi, reinterpret_cast<void**>(&owner), RTLD_DL_LINKMAP) && owner == m)
      return p;
  }
  return nullptr;
}

}  // namespace cuxfer::shim

using namespace cuxfer::shim;

// RTLD_DEFAULT is resolved from the shim here, not from the caller: for a
// name the shim exports, the same answer (the global scope, where the shim
// sits, comes first in every object's scope).
extern "C" void* cuxfer_dlsym_hooked(void* handle, const char* name) {
  void* fn = real_dlsym(handle, name);
  if (!fn) return fn;
  if (void* hook = cupti_hook_for(name, fn)) return hook;
  const HookEntry* e = find_hook(name);
  if (!e) return fn;
  if (is_own_hook(fn)) return fn;  // resolved to our export (RTLD_DEFAULT); real found lazily
  remember_real(id_of(*e), fn);
  return e->hook;
}

CUXFER_DRIVER_HOOK_BEGIN(cuGetProcAddress_v2, (const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                               CUdriverProcAddressQueryResult* status))
  CUresult r = real(symbol, pfn, cudaVersion, flags, status);
  if (r == CUDA_SUCCESS && pfn) *pfn = maybe_substitute(symbol, *pfn);
  return r;
}

extern "C" CUXFER_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                                   cuuint64_t flags) {
  using Fn = CUresult (*)(const char*, void**, int, cuuint64_t);
  auto real = real_function_as<Fn>(HookId::h_cuGetProcAddress);
  if (!real) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult r = real(symbol, pfn, cudaVersion, flags);
  if (r == CUDA_SUCCESS && pfn) *pfn = maybe_substitute(symbol, *pfn);
  return r;
}
