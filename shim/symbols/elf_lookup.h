// Symbol lookup in loaded objects' own dynamic symbol tables, without the
// loader's dlopen/dlsym: nothing here opens a handle, runs another object's
// initialisers or allocates, so it is safe inside any ELF constructor and
// inside malloc's first resolution. (The symbol table no longer needs it for
// RTLD_NEXT: the exported dlsym leaves that to glibc, interpose/dlsym_entry.cpp.)
#pragma once

#include <link.h>

#include <cstdint>

namespace cuxfer::shim {

// The definition of `name` in object `m` itself, as dlsym would return it
// from there: a defined STB_GLOBAL/STB_WEAK (or STB_GNU_UNIQUE) symbol of
// its .dynsym (found through DT_GNU_HASH, else DT_HASH), not hidden behind a
// non-default version (with several versions, the default one, as dlsym
// gives), an STT_GNU_IFUNC resolved by calling its resolver as glibc does,
// an STT_TLS symbol at this thread's copy (null if that is not allocated).
// Null if `m` does not define it. Not looked at: m's dependencies.
void* elf_lookup_in(const link_map* m, const char* name);

// The first definition of `name` in the objects after `after` in link_map
// order (what dlsym(RTLD_NEXT, name) called from `after` finds for objects
// loaded at startup), or null.
void* elf_lookup_after(const link_map* after, const char* name);

// The first object, in link_map order from the program, whose own dynamic
// symbol table defines `name` (elf_lookup_in), or null. Unlike
// dlsym(RTLD_DEFAULT), it finds objects outside the global scope: those
// dlopen()ed RTLD_LOCAL (the default) and what they depend on, as a plugin
// that links libpython. Under the loader's list lock.
const link_map* elf_object_defining(const char* name);

// The loader's count of objects loaded and unloaded so far (glibc's
// dlpi_adds + dlpi_subs, read from dl_iterate_phdr's first callback); it
// changes whenever an object is loaded or unloaded. 0 when the loader does
// not count. One callback under the loader's list lock: a few dozen
// instructions, where reading the whole list costs a few per object.
uint64_t loader_generation();

// The loader's count of objects unloaded so far (dlpi_subs); where the
// loader does not count, a different value at every call, so that every
// dlclose looks like an unload.
uint64_t loader_unloads();

}  // namespace cuxfer::shim
