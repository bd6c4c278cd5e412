#include "symbols/symbol_table.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <string>

#include "core/export.h"
#include "core/log.h"
#include "symbols/bound_definition.h"
#include "symbols/caller_cache.h"
#include "symbols/cuda_headers.h"
#include "symbols/elf_lookup.h"

// Our hooks are the CUDA entry points themselves: the CUDA headers declare
// each one, with its own type, under its exact name (the hook files define
// them), so their addresses are taken through those declarations.

namespace cuxfer::shim {
namespace detail {
std::atomic<void*> g_real[kHookCount];
}  // namespace detail

namespace {

struct Names {
  std::array<std::string, kHookCount> base;
  std::array<HookEntry, kHookCount> entries;
  std::array<uint16_t, kHookCount> sorted;  // indices sorted by name, for lookup
};

// "cuMemcpyHtoDAsync_v2_ptsz" -> "cuMemcpyHtoDAsync": what cuGetProcAddress is asked for.
std::string base_name(std::string n) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const char* suffix : {"_ptds", "_ptsz", "_v2", "_v3"}) {
      size_t len = std::strlen(suffix);
      if (n.size() > len && n.compare(n.size() - len, len, suffix) == 0) {
        n.resize(n.size() - len);
        changed = true;
      }
    }
  }
  return n;
}

const Names& names() {
  static const Names* table = [] {
    auto* t = new Names;
    size_t i = 0;
#define CUXFER_DRIVER(n) t->entries[i++] = HookEntry{#n, nullptr, Layer::Driver, reinterpret_cast<void*>(&::n)};
#define CUXFER_RUNTIME(n) t->entries[i++] = HookEntry{#n, nullptr, Layer::Runtime, reinterpret_cast<void*>(&::n)};
#include "symbols/hook_list.def"
#undef CUXFER_DRIVER
#undef CUXFER_RUNTIME
    for (size_t k = 0; k < kHookCount; ++k) {
      t->base[k] = base_name(t->entries[k].name);
      t->entries[k].base = t->base[k].c_str();
      t->sorted[k] = static_cast<uint16_t>(k);
    }
    std::sort(t->sorted.begin(), t->sorted.end(), [t](uint16_t a, uint16_t b) {
      return std::strcmp(t->entries[a].name, t->entries[b].name) < 0;
    });
    return t;
  }();
  return *table;
}

using DlsymFn = void* (*)(void*, const char*);

DlsymFn glibc_dlsym() {
  // No function-local static: the exported dlsym asks for this on its way to
  // glibc's, also while libcuxfer_memhooks.so resolves malloc, inside a
  // static's guarded initialisation of our own perhaps. A race only looks
  // it up twice.
  static std::atomic<void*> fn{nullptr};
  void* p = fn.load(std::memory_order_acquire);
  if (!p) {
    // dlvsym is not interposed, so this cannot recurse into our dlsym.
    p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    fn.store(p, std::memory_order_release);
  }
  return reinterpret_cast<DlsymFn>(p);
}

std::atomic<void*> g_exported[kHookCount];

// Each runtime hook's index among the runtime hooks (the per-object table's
// columns); kHookCount for a driver hook.
constexpr auto kRuntimeIndex = [] {
  std::array<uint16_t, kHookCount> index{};
  uint16_t next = 0;
  for (size_t i = 0; i < kHookCount; ++i)
    index[i] = kHookLayer[i] == Layer::Runtime ? next++ : static_cast<uint16_t>(kHookCount);
  return index;
}();

// Calling objects whose runtime is outside the global scope, with the
// functions found for each. 32 objects with their own libcudart is more than
// any process has; one beyond is resolved at each call, correctly, slowly.
using Callers = CallerCache<32, kRuntimeHookCount>;
CUXFER_LARGE_BSS Callers g_callers;

// Per runtime hook, the real function the app was handed our hook for by
// name (remember_real): the answer for callers whose scope has none.
std::atomic<void*> g_looked_up[kHookCount];

}  // namespace

const HookEntry& hook_entry(HookId id) { return names().entries[static_cast<size_t>(id)]; }

const HookEntry* find_hook(const char* name) {
  const Names& t = names();
  auto it = std::lower_bound(t.sorted.begin(), t.sorted.end(), name, [&](uint16_t k, const char* n) {
    return std::strcmp(t.entries[k].name, n) < 0;
  });
  if (it == t.sorted.end() || std::strcmp(t.entries[*it].name, name) != 0) return nullptr;
  return &t.entries[*it];
}

bool is_own_hook(const void* fn) {
  if (!fn) return false;
  for (const auto& e : names().entries)
    if (e.hook == fn) return true;
  return false;
}

void* real_dlsym(void* handle, const char* name) {
  DlsymFn fn = glibc_dlsym();
  return fn ? fn(handle, name) : nullptr;
}

void* glibc_dlsym_address() { return reinterpret_cast<void*>(glibc_dlsym()); }

int real_dlclose(void* handle) {
  using DlcloseFn = int (*)(void*);
  static std::atomic<DlcloseFn> fn{nullptr};
  DlcloseFn f = fn.load(std::memory_order_acquire);
  if (!f) {
    f = reinterpret_cast<DlcloseFn>(real_dlsym(RTLD_NEXT, "dlclose"));
    fn.store(f, std::memory_order_release);
  }
  return f ? f(handle) : -1;
}

void* libcuda_handle() {
  static std::atomic<void*> handle{nullptr};
  void* h = handle.load(std::memory_order_acquire);
  if (!h) {
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcuda.so", RTLD_NOW | RTLD_NOLOAD);
    // dlopen took a reference; keeping it is harmless (libcuda is never unloaded
    // while the app uses it) and saves a dlclose race.
    if (h) handle.store(h, std::memory_order_release);
  }
  return h;
}

void* driver_entry(std::atomic<void*>& slot, const char* name) {
  void* fn = slot.load(std::memory_order_acquire);
  if (fn) return fn;
  void* h = libcuda_handle();
  fn = h ? real_dlsym(h, name) : nullptr;
  if (fn) slot.store(fn, std::memory_order_release);
  return fn;
}

void remember_real(HookId id, void* fn) {
  if (!fn || is_own_hook(fn)) return;
  if (layer_of(id) == Layer::Runtime) {
    // Not the process's answer: which libcudart a handle named says nothing
    // about the one a PLT call from another object binds to.
    g_looked_up[static_cast<size_t>(id)].store(fn, std::memory_order_release);
    return;
  }
  void* expected = nullptr;
  detail::g_real[static_cast<size_t>(id)].compare_exchange_strong(expected, fn,
                                                                   std::memory_order_acq_rel);
}

void* exported_by_libcuda(HookId id) {
  auto& slot = g_exported[static_cast<size_t>(id)];
  void* p = slot.load(std::memory_order_acquire);
  if (!p) {
    void* h = libcuda_handle();
    p = h ? real_dlsym(h, hook_entry(id).name) : nullptr;
    if (p) slot.store(p, std::memory_order_release);
  }
  return p;
}

namespace {

void warn_missing(const HookEntry& e) {
  static std::atomic<bool> warned{false};
  log::warn_once(warned, std::string("cannot find the real ") + e.name +
                             " (is CUDA loaded?); the call fails as without a driver");
}

}  // namespace

void* detail::resolve_real(HookId id) {
  const HookEntry& e = hook_entry(id);
  if (e.layer == Layer::Runtime) return resolve_real_for(id, nullptr);
  void* p = exported_by_libcuda(id);
  if (p && !is_own_hook(p)) {
    remember_real(id, p);
    return detail::g_real[static_cast<size_t>(id)].load(std::memory_order_acquire);
  }
  warn_missing(e);
  return nullptr;
}

namespace {

// The function the app was last handed by dlsym for hook `id`, or null
// (said once) when it was handed none.
void* looked_up_or_missing(HookId id, const HookEntry& e) {
  if (void* p = g_looked_up[static_cast<size_t>(id)].load(std::memory_order_acquire)) return p;
  warn_missing(e);
  return nullptr;
}

}  // namespace

void* detail::resolve_real_for(HookId id, const void* caller) {
  const size_t column = kRuntimeIndex[static_cast<size_t>(id)];
  const link_map* object = object_containing(caller);
  const auto key = reinterpret_cast<uintptr_t>(object);
  if (void* p = g_callers.find(key, column)) return p;
  // Read before the loader is: an unload from here on keeps what is found
  // out of the table (it may lie in the object that went), and a load or
  // unload from here on keeps a miss from being remembered for it.
  const uint64_t seen = g_callers.epoch();
  const uint64_t generation = loader_generation();
  const HookEntry& e = hook_entry(id);
  // A caller that neither scope served (handed the hook by dlsym on a
  // runtime loaded RTLD_LOCAL: ctypes, a plugin host) takes the function it
  // was handed. Its dependency scope is searched once: it is fixed while the
  // object is loaded (an unload empties the table); the global scope again
  // only once the loader's generation moved. Asking the loader on each call
  // cost two global dlsym searches and a dlopen/dlclose pair of the caller's
  // object a call, and such a dlclose, on a thread still copying while the
  // process exits, races the loader's own exit: _dl_fini drops each object's
  // open count after it released the loader's lock, so an increment of ours
  // lost to it lets our dlclose unload the caller's object under the threads
  // running its code (a SIGSEGV of e2e.python_finalize).
  const uint64_t missed_at = g_callers.missed_at(key, column);
  if (missed_at != 0 && missed_at == generation) return looked_up_or_missing(id, e);
  if (void* p = global_scope_definition(e.name)) {
    g_callers.store_beside(g_real[static_cast<size_t>(id)], p, seen);
    return p;
  }
  if (missed_at == 0) {
    if (void* p = dependency_scope_definition(object, e.name)) {
      g_callers.store(key, column, p, seen);
      return p;
    }
  }
  g_callers.store_miss(key, column, generation, seen);
  return looked_up_or_missing(id, e);
}

void forget_unloaded_definitions() {
  // A function the app was handed by name stays while its object does
  // (asked outside the table's lock: the loader has locks of its own).
  bool keep[kHookCount];
  for (size_t i = 0; i < kHookCount; ++i) {
    void* p = g_looked_up[i].load(std::memory_order_acquire);
    keep[i] = p && object_containing(p);
  }
  g_callers.empty([&] {
    for (size_t i = 0; i < kHookCount; ++i) {
      if (kHookLayer[i] != Layer::Runtime) continue;  // libcuda stays: the shim holds a handle to it
      detail::g_real[i].store(nullptr, std::memory_order_release);
      if (!keep[i]) g_looked_up[i].store(nullptr, std::memory_order_release);
    }
  });
}

}  // namespace cuxfer::shim
