// libcuxfer_elftest_a.so, for elf_lookup_test: dynamic symbols of each kind
// the lookup must handle. Exported through elf_lookup_lib_a.map (versions
// VER_1 and VER_2; everything else local).
#include <cstdlib>

extern "C" {

// Only in this library.
int cuxfer_elftest_only_here() { return 11; }

// Defined here and in libcuxfer_elftest_b.so (linked after this one).
int cuxfer_elftest_dup() { return 'A'; }

// Weak.
__attribute__((weak)) int cuxfer_elftest_weak() { return 5; }

// Two versions: cuxfer_elftest_versioned@VER_1 (hidden) and @@VER_2 (default).
int cuxfer_elftest_versioned_v1() { return 1; }
int cuxfer_elftest_versioned_v2() { return 2; }
__asm__(".symver cuxfer_elftest_versioned_v1, cuxfer_elftest_versioned@VER_1");
__asm__(".symver cuxfer_elftest_versioned_v2, cuxfer_elftest_versioned@@VER_2");

// Defined, but local by the version script.
int cuxfer_elftest_local_only() { return 9; }

// An IFUNC: its resolver counts its calls.
int cuxfer_elftest_resolver_calls = 0;
int cuxfer_elftest_ifunc_impl() { return 42; }
int (*cuxfer_elftest_ifunc_resolver())() {
  ++cuxfer_elftest_resolver_calls;
  return &cuxfer_elftest_ifunc_impl;
}
int cuxfer_elftest_ifunc() __attribute__((ifunc("cuxfer_elftest_ifunc_resolver")));

// Thread-local.
__thread int cuxfer_elftest_tls = 7;

// Makes malloc an undefined symbol of this library's .dynsym.
void* cuxfer_elftest_calls_malloc(size_t n) { return std::malloc(n); }

}  // extern "C"
