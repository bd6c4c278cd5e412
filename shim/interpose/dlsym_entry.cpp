// The exported dlsym: glibc's own, entered with the caller's return address
// still in place, for every name the shim does not hook.
//
// glibc answers RTLD_NEXT (and RTLD_DEFAULT, and a failure's dlerror()) from
// the object that called dlsym, which it finds from its own return address.
// A hook that called glibc's dlsym from C++ would make that libcuxfer.so:
// RTLD_NEXT from a plugin loaded RTLD_LOCAL, which glibc resolves in the
// plugin's own dependencies (libc's puts), gave null, and every wrapper
// library that finds its next definition so broke under the shim. So the
// entry decides first, in cuxfer_dlsym_route, and then jumps (does not call)
// with the stack as the caller left it: to glibc's dlsym for a name the shim
// does not hook, for RTLD_NEXT (whose answer the shim never replaces), and
// while the shim is disabled; to lookup_hooks.cpp's cuxfer_dlsym_hooked,
// which hands out the shim's hook, otherwise.
//
// In a ThreadSanitizer build the exported dlsym is dlsym_entry_tsan.cpp's,
// which comes here (cuxfer_dlsym_routed) once the shim's constructor has run.
#include <dlfcn.h>

#include "core/config.h"
#include "interpose/cupti_hooks.h"
#include "interpose/lookup_hooks.h"
#include "symbols/symbol_table.h"

namespace {

// Only where glibc's dlsym cannot be found, which no supported glibc lacks.
void* no_dlsym(void*, const char*) { return nullptr; }

bool hooked_name(const char* name) {
  // A cheap first filter before the exact-name lookups (this is not prefix
  // hooking); it also keeps every libc name the libc hooks resolve during
  // start-up away from the configuration and the hook table.
  if (!name || name[0] != 'c' || name[1] != 'u') return false;
  return cuxfer::shim::find_hook(name) || cuxfer::shim::cupti_hooks_name(name);
}

}  // namespace

// Where the entry jumps for (handle, name).
extern "C" __attribute__((visibility("hidden"), used)) void* cuxfer_dlsym_route(void* handle, const char* name) {
  if (handle != RTLD_NEXT && hooked_name(name) && cuxfer::shim::config().enabled)
    return reinterpret_cast<void*>(&cuxfer_dlsym_hooked);
  void* glibc = cuxfer::shim::glibc_dlsym_address();
  return glibc ? glibc : reinterpret_cast<void*>(&no_dlsym);
}

#if defined(CUXFER_DLSYM_ENTRY_ASM)
#define CUXFER_DLSYM_ENTRY "cuxfer_dlsym_routed"
#define CUXFER_DLSYM_BINDING ".hidden " CUXFER_DLSYM_ENTRY
#else
#define CUXFER_DLSYM_ENTRY "dlsym"
#define CUXFER_DLSYM_BINDING ""
#endif

#if defined(__CET__)
#define CUXFER_ENTRY_LANDING "endbr64"
#else
#define CUXFER_ENTRY_LANDING ""
#endif

#if defined(__x86_64__)
// rdi and rsi (handle, name) are kept across the route's call; the stack is
// 16-byte aligned for it; the jump leaves the stack as the caller left it.
asm(R"(
    .text
    .globl )" CUXFER_DLSYM_ENTRY R"(
    )" CUXFER_DLSYM_BINDING R"(
    .type )" CUXFER_DLSYM_ENTRY R"(, @function
)" CUXFER_DLSYM_ENTRY R"(:
    .cfi_startproc
    )" CUXFER_ENTRY_LANDING R"(
    push %rdi
    .cfi_adjust_cfa_offset 8
    push %rsi
    .cfi_adjust_cfa_offset 8
    sub $8, %rsp
    .cfi_adjust_cfa_offset 8
    call cuxfer_dlsym_route
    add $8, %rsp
    .cfi_adjust_cfa_offset -8
    pop %rsi
    .cfi_adjust_cfa_offset -8
    pop %rdi
    .cfi_adjust_cfa_offset -8
    jmp *%rax
    .cfi_endproc
    .size )" CUXFER_DLSYM_ENTRY R"(, .-)" CUXFER_DLSYM_ENTRY R"(
)");
#elif defined(__aarch64__)
#if defined(__ARM_FEATURE_BTI_DEFAULT)
#define CUXFER_AARCH64_LANDING "hint #34"
#else
#define CUXFER_AARCH64_LANDING ""
#endif
// x0 and x1 (handle, name) are kept in the frame across the route's call;
// x30, the caller's return address, is restored before the branch, which
// goes through x16 (allowed into a "bti c" landing pad).
asm(R"(
    .text
    .globl )" CUXFER_DLSYM_ENTRY R"(
    )" CUXFER_DLSYM_BINDING R"(
    .type )" CUXFER_DLSYM_ENTRY R"(, %function
)" CUXFER_DLSYM_ENTRY R"(:
    .cfi_startproc
    )" CUXFER_AARCH64_LANDING R"(
    stp x29, x30, [sp, #-32]!
    .cfi_def_cfa_offset 32
    .cfi_offset 29, -32
    .cfi_offset 30, -24
    mov x29, sp
    stp x0, x1, [sp, #16]
    bl cuxfer_dlsym_route
    mov x16, x0
    ldp x0, x1, [sp, #16]
    ldp x29, x30, [sp], #32
    .cfi_def_cfa_offset 0
    .cfi_restore 29
    .cfi_restore 30
    br x16
    .cfi_endproc
    .size )" CUXFER_DLSYM_ENTRY R"(, .-)" CUXFER_DLSYM_ENTRY R"(
)");
#else
#error "libcuxfer.so's dlsym entry (interpose/dlsym_entry.cpp) has no version for this architecture"
#endif
