// The exported dlsym of a ThreadSanitizer build (x86-64), built without TSan's
// instrumentation. TSan's start-up, before any constructor runs and before it
// can record anything, resolves its interceptors with dlsym(RTLD_NEXT, ...):
// that call must not reach the instrumented hook (its first instrumented
// function entry, or its dl_iterate_phdr, TSan's interceptor not yet set up,
// crashes the process). Until the shim's constructor has run, this entry
// jumps to glibc's dlsym with the caller's own return address still on the
// stack, so RTLD_NEXT is resolved from the caller as without the shim; from
// then on it jumps to the entry the release build exports as dlsym
// (dlsym_entry.cpp, here under the hidden name cuxfer_dlsym_routed). Release
// builds do not contain this file.
#include <dlfcn.h>

#include "interpose/lookup_hooks.h"

extern "C" {

__attribute__((visibility("hidden"))) volatile unsigned char cuxfer_dlsym_ready = 0;

// glibc's dlsym (dlvsym is interposed by neither the shim nor TSan). Not
// symbol_table's glibc_dlsym(): that one is instrumented and guards a static
// local, and __cxa_guard_acquire is TSan's interceptor, not yet set up here.
__attribute__((visibility("hidden"), used)) void* cuxfer_glibc_dlsym() {
  static void* volatile fn = nullptr;
  void* p = fn;
  if (!p) {
    p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    fn = p;
  }
  return p;
}

}  // extern "C"

// dlsym(handle, name): rdi and rsi are kept across the helper call; the stack
// is as the caller left it when control leaves, so the callee sees the
// caller's return address.
asm(R"(
    .text
    .globl dlsym
    .type dlsym, @function
dlsym:
    cmpb $0, cuxfer_dlsym_ready(%rip)
    jne cuxfer_dlsym_routed
    push %rdi
    push %rsi
    sub $8, %rsp
    call cuxfer_glibc_dlsym
    add $8, %rsp
    pop %rsi
    pop %rdi
    test %rax, %rax
    jz 1f
    jmp *%rax
1:  ret
    .size dlsym, .-dlsym
)");

namespace cuxfer::shim {
void mark_dlsym_ready() { __atomic_store_n(&cuxfer_dlsym_ready, 1, __ATOMIC_RELEASE); }
}  // namespace cuxfer::shim
