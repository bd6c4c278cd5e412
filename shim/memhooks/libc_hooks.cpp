// libcuxfer_memhooks.so: libc hooks for the pinned rewrite's registration
// cache. Preloaded next to libcuxfer.so only when the rewrite may register
// memory in place (`cuxfer record --rewrite=pin` adds it): the shim must know
// which host memory the app owns (so that only memory whose end it can see is
// registered) and must know before that memory goes away.
//
//   malloc family  large allocations are reported (memory/host_ranges.h);
//                  free/realloc invalidate their registrations before the real call
//   mmap           the app's large anonymous read-write mappings are reported;
//                  MAP_FIXED over a registration invalidates it first
//   munmap, mremap, madvise(DONTNEED/FREE/REMOVE), brk/sbrk shrinking
//                  invalidate registrations under the range before the real call
//
// Invalidating never calls the driver and never waits (DESIGN principle 10):
// the registrations stop being trusted at once and are queued; the shim
// unregisters them before its next driver call for the app
// (rewrite/registration_cache.h). So free() never waits for another thread's
// cuMemHostRegister, as the driver would make an inline unregister do.
//
// glibc's own unmapping inside free/realloc (mmapped chunks, heap trimming) is
// covered because free/realloc are hooked and registrations never extend over
// free memory; memory released without any PLT call (thread stacks, dlclose)
// is never reported, so never registered. Each hook forwards to the next
// definition (RTLD_NEXT), so a malloc replacement preloaded after it (jemalloc,
// tcmalloc) keeps working. Without libcuxfer.so, or with registration off,
// the hooks only forward. The interface: memhooks/memhooks_api.h.
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "memhooks/memhooks_api.h"

#define CUXFER_EXPORT __attribute__((visibility("default")))

// LeakSanitizer's (and ASan's) interface, where one is loaded (see for_leak_checker).
extern "C" __attribute__((weak)) void __lsan_ignore_object(const void* p);

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

namespace {

// libcuxfer.so's side, looked up once at load (null: forward only).
struct Shim {
  decltype(&cuxfer_mem_allocated) allocated = nullptr;
  decltype(&cuxfer_mem_freeing) freeing = nullptr;
  decltype(&cuxfer_mem_going) going = nullptr;
  decltype(&cuxfer_mem_discarding) discarding = nullptr;
  decltype(&cuxfer_mem_is_mapping) is_mapping = nullptr;
  decltype(&cuxfer_mem_ranges_empty) ranges_empty = nullptr;
  decltype(&cuxfer_mem_registrations_exist) registrations_exist = nullptr;
  decltype(&cuxfer_mem_check_lock_order) check_lock_order = nullptr;  // lock-order-checked builds only
};
Shim g_shim;
std::atomic<uint64_t> g_track_min{0};  // 0 until attached: forward only

uint64_t host_tracking_min() { return g_track_min.load(std::memory_order_relaxed); }
bool registrations_exist() { return g_shim.registrations_exist && g_shim.registrations_exist(); }

struct Real {
  void* (*malloc)(size_t);
  void (*free)(void*);
  void* (*calloc)(size_t, size_t);
  void* (*realloc)(void*, size_t);
  int (*posix_memalign)(void**, size_t, size_t);
  void* (*aligned_alloc)(size_t, size_t);
  void* (*memalign)(size_t, size_t);
  void* (*valloc)(size_t);
  void* (*pvalloc)(size_t);
  size_t (*usable_size)(void*);
  void* (*mmap)(void*, size_t, int, int, int, off_t);
  int (*munmap)(void*, size_t);
  void* (*mremap)(void*, size_t, size_t, int, ...);
  int (*madvise)(void*, size_t, int);
  int (*brk)(void*);
  void* (*sbrk)(intptr_t);
};

Real g_real;
enum : int { kUnresolved = 0, kResolving = 1, kReady = 2 };
std::atomic<int> g_state{kUnresolved};
thread_local bool t_resolving __attribute__((tls_model("initial-exec"))) = false;

// dlsym itself may allocate while the real allocator is being looked up:
// those few allocations come from here and are never freed.
constexpr size_t kArenaBytes = 256 << 10;
alignas(64) char g_arena[kArenaBytes];
std::atomic<size_t> g_arena_used{0};

bool in_arena(const void* p) {
  auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(g_arena);
  return a >= b && a < b + kArenaBytes;
}

void* arena_alloc(size_t n, size_t align = 16) {
  if (align < 16) align = 16;
  size_t need = ((n + 15) & ~size_t(15)) + align;  // room for the size header
  size_t at = g_arena_used.fetch_add(need);
  if (at + need > kArenaBytes) return nullptr;
  auto base = reinterpret_cast<uintptr_t>(g_arena + at);
  uintptr_t p = (base + 8 + align - 1) & ~(uintptr_t(align) - 1);
  reinterpret_cast<size_t*>(p)[-1] = n;
  return reinterpret_cast<void*>(p);
}

size_t arena_size(const void* p) { return reinterpret_cast<const size_t*>(p)[-1]; }

// What the dynamic loader allocates (link maps, dynamic TLS blocks) lives as
// long as the process and is reachable only through the loader's own data:
// LeakSanitizer (in ASan too) treats a block as the loader's when the
// allocation's immediate caller lies in ld.so. With these hooks in front of
// its malloc that caller is this library, so the loader's blocks would be
// reported as leaks at exit and the program's exit status changed (e.g. an
// -fsanitize=leak program under `cuxfer record --rewrite=pin`, exit 23
// instead of 0). A block the loader asks for is therefore handed to the leak
// checker's __lsan_ignore_object here, as LeakSanitizer would have treated it.
// Without a leak checker this is one predictable branch. The leak checker's
// function is a weak reference, bound by the loader when these hooks are
// loaded (null without one): looking it up with dlsym when it is absent would
// allocate its error message, inside whatever allocator call made us resolve
// (jemalloc's mmap during its own malloc: a deadlock on jemalloc's lock).
uintptr_t g_loader_begin = 0, g_loader_end = 0;

// The loader's mapped extent, from its own program headers (AT_BASE: where
// the kernel put the interpreter; 0 when ld.so was run as the program).
void find_loader() {
  const uintptr_t base = getauxval(AT_BASE);
  if (!base) return;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_phentsize != sizeof(Elf64_Phdr)) return;
  const auto* ph = reinterpret_cast<const Elf64_Phdr*>(base + eh->e_phoff);
  uintptr_t end = 0;
  for (int i = 0; i < eh->e_phnum; ++i)
    if (ph[i].p_type == PT_LOAD && base + ph[i].p_vaddr + ph[i].p_memsz > end) end = base + ph[i].p_vaddr + ph[i].p_memsz;
  g_loader_begin = base;
  g_loader_end = end;
}

// `p` was allocated for `caller`: the loader's blocks are not the app's leaks.
inline void for_leak_checker(const void* p, const void* caller) {
  if (__builtin_expect(__lsan_ignore_object != nullptr, 0) && p) {
    const auto c = reinterpret_cast<uintptr_t>(caller);
    if (c >= g_loader_begin && c < g_loader_end) __lsan_ignore_object(p);
  }
}

template <typename F>
void next(F& fn, const char* name) {
  // Through libcuxfer.so's dlsym when it is loaded: it redoes RTLD_NEXT
  // lookups from the calling object, i.e. from here.
  fn = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

void resolve() {
  int expected = kUnresolved;
  if (g_state.compare_exchange_strong(expected, kResolving, std::memory_order_acq_rel)) {
    t_resolving = true;
    Real r{};
    next(r.malloc, "malloc");
    next(r.free, "free");
    next(r.calloc, "calloc");
    next(r.realloc, "realloc");
    next(r.posix_memalign, "posix_memalign");
    next(r.aligned_alloc, "aligned_alloc");
    next(r.memalign, "memalign");
    next(r.valloc, "valloc");
    next(r.pvalloc, "pvalloc");
    next(r.usable_size, "malloc_usable_size");
    next(r.mmap, "mmap");
    next(r.munmap, "munmap");
    next(r.mremap, "mremap");
    next(r.madvise, "madvise");
    next(r.brk, "brk");
    next(r.sbrk, "sbrk");
    find_loader();
    g_real = r;
    t_resolving = false;
    g_state.store(kReady, std::memory_order_release);
    return;
  }
  while (g_state.load(std::memory_order_acquire) != kReady) sched_yield();
}

// Every hook reaches the next definition through here. In a lock-order-checked
// build (CUXFER_LOCK_ORDER_CHECK) the shim checks on each call that the
// calling thread holds none of its locks that this hook's path may take
// (core/ranked_lock.h): whether this call takes one depends on its size, the
// fault on the order does not.
inline const Real& real() {
  if (__builtin_expect(g_state.load(std::memory_order_acquire) != kReady, 0)) resolve();
#ifdef CUXFER_LOCK_ORDER_CHECK
  if (g_shim.check_lock_order && host_tracking_min()) g_shim.check_lock_order();
#endif
  return g_real;
}

inline bool track_size(size_t n) {
  uint64_t min = host_tracking_min();
  return min != 0 && n >= min;
}

void after_alloc(void* p, size_t n) {
  if (p && track_size(n)) g_shim.allocated(p, n, 1);
}

// A block is about to be freed or moved: forget it and drop what is registered on it.
void before_release(void* p) {
  if (!p || !host_tracking_min() || g_shim.ranges_empty()) return;
  const Real& r = real();
  if (r.usable_size && r.usable_size(p) < host_tracking_min()) return;  // never reported
  g_shim.freeing(p);
}

// [addr, addr+len) stops being the memory it was.
void range_going(void* addr, size_t len) {
  if (!host_tracking_min()) return;
  g_shim.going(addr, len);
}

bool discards_contents(int advice) {
  return advice == MADV_DONTNEED || advice == MADV_FREE || advice == MADV_REMOVE || advice == MADV_DONTNEED_LOCKED;
}

// Runs after libcuxfer.so's constructor (it is preloaded first). Allocations
// made before this are not reported: they are never registered, only staged.
__attribute__((constructor)) void attach() {
  real();
  auto attach_fn = reinterpret_cast<decltype(&cuxfer_mem_attach)>(dlsym(RTLD_DEFAULT, "cuxfer_mem_attach"));
  if (!attach_fn) return;  // libcuxfer.so is not loaded: forward only
  auto get = [](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(RTLD_DEFAULT, name));
    return fn != nullptr;
  };
  Shim s;
  if (!get(s.allocated, "cuxfer_mem_allocated") || !get(s.freeing, "cuxfer_mem_freeing") ||
      !get(s.going, "cuxfer_mem_going") || !get(s.discarding, "cuxfer_mem_discarding") ||
      !get(s.is_mapping, "cuxfer_mem_is_mapping") || !get(s.ranges_empty, "cuxfer_mem_ranges_empty") ||
      !get(s.registrations_exist, "cuxfer_mem_registrations_exist"))
    return;
#ifdef CUXFER_LOCK_ORDER_CHECK
  get(s.check_lock_order, "cuxfer_mem_check_lock_order");  // absent from an unchecked shim: no check
#endif
  g_shim = s;
  g_track_min.store(attach_fn(), std::memory_order_release);
}

}  // namespace

extern "C" {

CUXFER_EXPORT void* malloc(size_t n) noexcept {
  if (__builtin_expect(t_resolving, 0)) return arena_alloc(n);
  void* p = real().malloc(n);
  after_alloc(p, n);
  for_leak_checker(p, __builtin_return_address(0));
  return p;
}

CUXFER_EXPORT void free(void* p) noexcept {
  if (!p || __builtin_expect(in_arena(p), 0)) return;
  before_release(p);
  real().free(p);
}

CUXFER_EXPORT void* calloc(size_t count, size_t size) noexcept {
  size_t n = 0;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return nullptr;
  }
  if (__builtin_expect(t_resolving, 0)) return arena_alloc(n);  // static storage: already zero
  void* p = real().calloc(count, size);
  after_alloc(p, n);
  for_leak_checker(p, __builtin_return_address(0));
  return p;
}

CUXFER_EXPORT void* realloc(void* p, size_t n) noexcept {
  if (__builtin_expect(t_resolving, 0) || (p && in_arena(p))) {
    void* q = t_resolving ? arena_alloc(n) : real().malloc(n);
    if (q && p) std::memcpy(q, p, arena_size(p) < n ? arena_size(p) : n);
    return q;
  }
  before_release(p);
  void* q = real().realloc(p, n);
  after_alloc(q, n);
  for_leak_checker(q, __builtin_return_address(0));
  return q;
}

CUXFER_EXPORT void* reallocarray(void* p, size_t count, size_t size) noexcept {
  size_t n = 0;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(p, n);
}

CUXFER_EXPORT int posix_memalign(void** out, size_t align, size_t n) noexcept {
  if (__builtin_expect(t_resolving, 0)) {
    *out = arena_alloc(n, align);
    return *out ? 0 : ENOMEM;
  }
  int r = real().posix_memalign(out, align, n);
  if (r == 0) after_alloc(*out, n);
  if (r == 0) for_leak_checker(*out, __builtin_return_address(0));
  return r;
}

CUXFER_EXPORT void* aligned_alloc(size_t align, size_t n) noexcept {
  if (__builtin_expect(t_resolving, 0)) return arena_alloc(n, align);
  void* p = real().aligned_alloc(align, n);
  after_alloc(p, n);
  for_leak_checker(p, __builtin_return_address(0));
  return p;
}

CUXFER_EXPORT void* memalign(size_t align, size_t n) noexcept {
  if (__builtin_expect(t_resolving, 0)) return arena_alloc(n, align);
  void* p = real().memalign(align, n);
  after_alloc(p, n);
  for_leak_checker(p, __builtin_return_address(0));
  return p;
}

CUXFER_EXPORT void* valloc(size_t n) noexcept {
  if (__builtin_expect(t_resolving, 0)) return arena_alloc(n, 4096);
  const Real& r = real();
  void* p = r.valloc ? r.valloc(n) : r.memalign(static_cast<size_t>(sysconf(_SC_PAGESIZE)), n);
  after_alloc(p, n);
  return p;
}

CUXFER_EXPORT void* pvalloc(size_t n) noexcept {
  if (__builtin_expect(t_resolving, 0)) return arena_alloc(n, 4096);
  const Real& r = real();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* p = r.pvalloc ? r.pvalloc(n) : r.memalign(page, (n + page - 1) & ~(page - 1));
  after_alloc(p, n);
  return p;
}

// While this thread resolves the next definitions (dlsym), the memory calls
// it makes re-entrantly -- an allocator preloaded after us (jemalloc) running
// its initializer inside that dlsym, say -- go straight to the kernel: real()
// would wait for the resolution this very thread is making.
CUXFER_EXPORT void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) noexcept {
  if (__builtin_expect(t_resolving, 0))
    return reinterpret_cast<void*>(syscall(SYS_mmap, addr, len, prot, flags, fd, off));
  if (flags & MAP_FIXED) range_going(addr, len);  // replaces whatever was mapped there
  void* p = real().mmap(addr, len, prot, flags, fd, off);
  if (p != MAP_FAILED && (flags & MAP_ANONYMOUS) && (prot & PROT_READ) && (prot & PROT_WRITE) && track_size(len))
    g_shim.allocated(p, len, 2);
  return p;
}

CUXFER_EXPORT void* mmap64(void* addr, size_t len, int prot, int flags, int fd, off_t off) noexcept {
  return mmap(addr, len, prot, flags, fd, off);
}

CUXFER_EXPORT int munmap(void* addr, size_t len) noexcept {
  if (__builtin_expect(t_resolving, 0)) return static_cast<int>(syscall(SYS_munmap, addr, len));
  range_going(addr, len);
  return real().munmap(addr, len);
}

CUXFER_EXPORT void* mremap(void* old, size_t old_len, size_t new_len, int flags, ...) noexcept {
  void* new_addr = nullptr;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    new_addr = va_arg(ap, void*);
    va_end(ap);
  }
  if (__builtin_expect(t_resolving, 0))
    return reinterpret_cast<void*>(syscall(SYS_mremap, old, old_len, new_len, flags, new_addr));
  const bool was_mapping = host_tracking_min() && g_shim.is_mapping(old);
  range_going(old, old_len);
  if (flags & MREMAP_FIXED) range_going(new_addr, new_len);
  void* p = (flags & MREMAP_FIXED) ? real().mremap(old, old_len, new_len, flags, new_addr)
                                   : real().mremap(old, old_len, new_len, flags);
  if (p != MAP_FAILED && was_mapping && track_size(new_len))
    g_shim.allocated(p, new_len, 2);
  return p;
}

CUXFER_EXPORT int madvise(void* addr, size_t len, int advice) noexcept {
  if (__builtin_expect(t_resolving, 0)) return static_cast<int>(syscall(SYS_madvise, addr, len, advice));
  if (discards_contents(advice) && host_tracking_min() && registrations_exist()) g_shim.discarding(addr, len);
  return real().madvise(addr, len, advice);
}

CUXFER_EXPORT int brk(void* end) noexcept {
  if (__builtin_expect(t_resolving, 0)) {  // no heap growth mid-resolution: callers fall back to mmap
    errno = ENOMEM;
    return -1;
  }
  void* current = real().sbrk(0);
  if (current != reinterpret_cast<void*>(-1) && end < current)
    range_going(end, static_cast<char*>(current) - static_cast<char*>(end));
  return real().brk(end);
}

CUXFER_EXPORT void* sbrk(intptr_t increment) noexcept {
  if (__builtin_expect(t_resolving, 0)) {
    errno = ENOMEM;
    return reinterpret_cast<void*>(-1);
  }
  if (increment < 0) {
    void* current = real().sbrk(0);
    if (current != reinterpret_cast<void*>(-1))
      range_going(static_cast<char*>(current) + increment, static_cast<size_t>(-increment));
  }
  return real().sbrk(increment);
}

}  // extern "C"
