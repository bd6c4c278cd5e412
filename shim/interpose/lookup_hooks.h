// The lookup doors that bypass the PLT (lookup_hooks.cpp): what the other
// hooks need of them.
#pragma once

namespace cuxfer::shim {

// The definition of `name` that a call from `caller` would reach without the
// shim: first in the caller's own lookup scope, then the first object in load
// order that defines it; never `self` (our export). Null if none. Slow (it
// opens handles): for rare calls, not for copies.
void* find_next_definition(const void* caller, const char* name, const void* self);

#if defined(CUXFER_DLSYM_ENTRY_ASM)
// ThreadSanitizer builds (dlsym_entry_tsan.cpp): from now on the exported
// dlsym goes to the hook. Called first by the shim's constructor.
void mark_dlsym_ready();
#endif

}  // namespace cuxfer::shim
