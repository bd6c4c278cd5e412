// The table of interposed symbols: for each, our hook and the real function it
// forwards to. Real functions are resolved at first use (a driver entry point
// also as soon as the app looks it up through dlsym/cuGetProcAddress) and
// then read with a single load on every call: no dlsym on a hot path.
//
// A driver hook's real function is the process's libcuda's. A runtime hook's
// is the one its calling object would have bound to (bound_definition.h):
// the global scope's where it has one, which is every caller's, kept in one
// slot per hook; else the caller's own dependencies' (a plugin or Python
// extension module loaded RTLD_LOCAL with its own libcudart), kept per
// calling object (caller_cache.h), so that two runtimes in one process each
// keep their own state. Both are forgotten when an object is unloaded.
#pragma once

#include <dlfcn.h>

#include <atomic>
#include <cstdint>

namespace cuxfer::shim {

enum class HookId : uint16_t {
// Prefixed: CUDA headers #define some of these names to their versioned forms.
#define CUXFER_DRIVER(n) h_##n,
#define CUXFER_RUNTIME(n) h_##n,
#include "symbols/hook_list.def"
#undef CUXFER_DRIVER
#undef CUXFER_RUNTIME
  kCount
};
inline constexpr size_t kHookCount = static_cast<size_t>(HookId::kCount);
// How many hooks are of the runtime layer.
inline constexpr size_t kRuntimeHookCount = 0
#define CUXFER_DRIVER(n)
#define CUXFER_RUNTIME(n) +1
#include "symbols/hook_list.def"
#undef CUXFER_DRIVER
#undef CUXFER_RUNTIME
    ;
// Event::api of the shim's own pinned staging pool allocation (the rewrite's
// pinning cost); the trace's API name table lists it after the hooks.
// (Their names: trace/shim_names.h.)
inline constexpr uint16_t kStagingPoolApi = static_cast<uint16_t>(kHookCount);
// Event::api of the rewrite's in-place registrations (their pinning cost).
inline constexpr uint16_t kRegisterApi = static_cast<uint16_t>(kHookCount + 1);
// Event::api of content fingerprints (EventKind::Fingerprint).
inline constexpr uint16_t kFingerprintApi = static_cast<uint16_t>(kHookCount + 2);
// Event::api of NVTX range-stack changes (EventKind::NvtxRanges).
inline constexpr uint16_t kNvtxApi = static_cast<uint16_t>(kHookCount + 3);

enum class Layer : uint8_t { Driver, Runtime };

struct HookEntry {
  const char* name;  // exported symbol name, e.g. "cuMemcpyHtoD_v2_ptds"
  const char* base;  // name cuGetProcAddress is asked for, e.g. "cuMemcpyHtoD"
  Layer layer;
  void* hook;        // our definition
};

const HookEntry& hook_entry(HookId id);

// The layer of each hook, known at compile time (the hot path asks per call).
inline constexpr Layer kHookLayer[] = {
#define CUXFER_DRIVER(n) Layer::Driver,
#define CUXFER_RUNTIME(n) Layer::Runtime,
#include "symbols/hook_list.def"
#undef CUXFER_DRIVER
#undef CUXFER_RUNTIME
};
static_assert(sizeof(kHookLayer) / sizeof(kHookLayer[0]) == kHookCount);
constexpr Layer layer_of(HookId id) { return kHookLayer[static_cast<size_t>(id)]; }
// Exact-name lookup; null if the name is not interposed.
const HookEntry* find_hook(const char* name);
inline HookId id_of(const HookEntry& e) { return static_cast<HookId>(&e - &hook_entry(HookId{0})); }
bool is_own_hook(const void* fn);

// glibc's dlsym, bypassing our own interposed dlsym, and its address (null
// if it cannot be found). Called from here, RTLD_NEXT and RTLD_DEFAULT are
// resolved from the shim, not from the app's caller.
void* real_dlsym(void* handle, const char* name);
void* glibc_dlsym_address();
// glibc's dlclose, bypassing our hook (for the shim's own handles).
int real_dlclose(void* handle);
// The next definition of `name` after the shim (libc's, for the libc
// functions the shim hooks: _exit, the exec family, sigaction), typed.
template <typename Fn>
inline Fn next_function(const char* name) {
  return reinterpret_cast<Fn>(real_dlsym(RTLD_NEXT, name));
}
// The process's libcuda, if loaded (never loads it).
void* libcuda_handle();
// A driver entry point outside the hook list, by name: found in libcuda once
// it is loaded. Only a success is remembered (`slot`); a miss (libcuda not
// loaded yet) is looked up again next time.
void* driver_entry(std::atomic<void*>& slot, const char* name);
// The current context's device ordinal, or -1 (no context, no driver yet).
int8_t current_device_ordinal();

namespace detail {
// Per hook: the driver's function, or the global scope's definition of a
// runtime function; null until resolved (and a runtime one while the global
// scope has none).
extern std::atomic<void*> g_real[kHookCount];
void* resolve_real(HookId id);
void* resolve_real_for(HookId id, const void* caller);
}  // namespace detail

// The real function behind a hook for a call whose return address is
// `caller`, or null if it cannot be found (the hook then returns the API's
// "not initialised/not supported" error, as a missing driver would). A
// driver hook's does not depend on the caller; a runtime hook's does only
// where the global scope has none, where it costs a lookup of the caller's
// object in a small table.
inline void* real_function(HookId id, const void* caller) {
  void* p = detail::g_real[static_cast<size_t>(id)].load(std::memory_order_acquire);
  if (__builtin_expect(p != nullptr, 1)) return p;
  return layer_of(id) == Layer::Driver ? detail::resolve_real(id) : detail::resolve_real_for(id, caller);
}
// The shim's own calls (driver entry points), which have no app caller.
inline void* real_function(HookId id) { return real_function(id, nullptr); }
// The same with its type: the one way code reaches a real function
// (CUXFER_REAL in interpose/hook_macros.h names it by the hook and takes the
// type from the CUDA headers' declaration).
template <typename Fn>
inline Fn real_function_as(HookId id, const void* caller) {
  return reinterpret_cast<Fn>(real_function(id, caller));
}
template <typename Fn>
inline Fn real_function_as(HookId id) {
  return reinterpret_cast<Fn>(real_function(id));
}

// The app looked `fn` up by name (dlsym on a handle, cuGetProcAddress) and
// was handed our hook for it: a driver function becomes the hook's real one
// unless one is known already; a runtime function is kept as the answer for
// callers whose own scope has none (they call the hook through the pointer
// they were handed). Never `fn` if it is our own hook (which would make the
// hook call itself).
void remember_real(HookId id, void* fn);

// An object was unloaded (interpose/dlclose_hook.cpp): every runtime function
// remembered is forgotten and found again at its next call, except one the
// app was handed by name whose object is still loaded.
void forget_unloaded_definitions();

// What libcuda exports under this hook's exact name (cached); used to tell
// which variant cuGetProcAddress handed out.
void* exported_by_libcuda(HookId id);

}  // namespace cuxfer::shim
