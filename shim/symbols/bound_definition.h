// The definition a calling object would have bound to without the shim: what
// the dynamic linker resolves a call from that object to. Its lookup scope is
// the global scope first (the program, the preloads, what they link, every
// RTLD_GLOBAL library), then, for an object loaded with dlopen(RTLD_LOCAL)
// and what it links, that object's own dependencies. The shim itself, which
// sits in the global scope under every interposed name, is left out.
//
// Slow (the loader's own dlsym, and a dlopen(RTLD_NOLOAD) of the caller for
// its dependencies): for a function's first call from an object, never per
// call. Leaves no dlerror() message of its own behind.
#pragma once

#include <link.h>

namespace cuxfer::shim {

// The loaded object whose mapping holds `address` (a return address), or
// null. Lock-free where glibc has _dl_find_object (2.35), else dladdr's.
const link_map* object_containing(const void* address);

// The first definition of `name` in the global scope other than the shim's
// own export, or null: the answer for every caller where there is one, since
// every object's scope starts with the global one.
void* global_scope_definition(const char* name);

// The definition of `name` in `object`'s own dependency scope (the object
// and what it links, breadth first), or null; null for the program, whose
// scope is the global one.
void* dependency_scope_definition(const link_map* object, const char* name);

}  // namespace cuxfer::shim
