// The lookup doors that bypass the PLT (lookup_hooks.cpp): what the other
// hooks need of them.
#pragma once

namespace cuxfer::shim {

// The definition of `name` that a call from `caller` would reach without the
// shim: first in the caller's own lookup scope, then the first object in load
// order that defines it; never `self` (our export). Null if none. Slow (it
// opens handles): for rare calls, not for copies.
void* find_next_definition(const void* caller, const char* name, const void* self);

}  // namespace cuxfer::shim

// dlsym for a name the shim hooks, asked of a handle or RTLD_DEFAULT while the
// shim is enabled (dlsym_entry.cpp jumps here): glibc's answer, or our hook
// in its place. Its return address is the app's caller.
extern "C" __attribute__((visibility("hidden"))) void* cuxfer_dlsym_hooked(void* handle, const char* name);

namespace cuxfer::shim {

#if defined(CUXFER_DLSYM_ENTRY_ASM)
// ThreadSanitizer builds (dlsym_entry_tsan.cpp): from now on the exported
// dlsym goes to the hook. Called first by the shim's constructor.
void mark_dlsym_ready();
#endif

}  // namespace cuxfer::shim
