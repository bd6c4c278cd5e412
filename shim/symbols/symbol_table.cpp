#include "symbols/symbol_table.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <string>

#include "core/log.h"
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
  static DlsymFn fn = [] {
    // dlvsym is not interposed, so this cannot recurse into our dlsym.
    void* p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return reinterpret_cast<DlsymFn>(p);
  }();
  return fn;
}

std::atomic<void*> g_exported[kHookCount];

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

// libcuxfer.so's own entry in the loader's list.
const link_map* own_link_map() {
  static const link_map* const self = [] {
    Dl_info info;
    link_map* m = nullptr;
    return dladdr1(reinterpret_cast<void*>(&real_dlsym), &info, reinterpret_cast<void**>(&m), RTLD_DL_LINKMAP)
               ? m
               : nullptr;
  }();
  return self;
}

}  // namespace

void* detail::resolve_real(HookId id) {
  const HookEntry& e = hook_entry(id);
  void* p = nullptr;
  if (e.layer == Layer::Driver) {
    p = exported_by_libcuda(id);
  } else {
    p = real_dlsym(RTLD_NEXT, e.name);
    // Not in the global scope: a libcudart.so that a plugin dlopen()ed with
    // the default RTLD_LOCAL depends on (or a Python extension module's,
    // which Python loads so). The plugin's calls bind to our export all the
    // same; the real one is found by walking every object after ours.
    if (!p || is_own_hook(p)) p = elf_lookup_after(own_link_map(), e.name);
  }
  if (p && !is_own_hook(p)) {
    remember_real(id, p);
    return detail::g_real[static_cast<size_t>(id)].load(std::memory_order_acquire);
  }
  static std::atomic<bool> warned{false};
  log::warn_once(warned, std::string("cannot find the real ") + e.name +
                             " (is CUDA loaded?); the call fails as without a driver");
  return nullptr;
}

}  // namespace cuxfer::shim
