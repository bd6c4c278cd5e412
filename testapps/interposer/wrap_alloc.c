/* wrap_alloc: another interposer, as the tools cuxfer runs beside are written
 * (other LD_PRELOAD tools, MPI's and UCX's memory hooks, allocator shims): it
 * wraps malloc, calloc, realloc, free, mmap, munmap and dlsym, finding each
 * next definition through dlsym(RTLD_NEXT) (dlsym's own through dlvsym), and
 * counts the calls. Preloaded before or after libcuxfer.so, or loaded with
 * dlopen (wrap_alloc_selftest), everything must work as without cuxfer
 * (tests/e2e/run_coexist.py).
 *
 * At exit it prints "wrap_alloc: active (...)" on stderr when it wrapped
 * anything, so a test can see it was in the chain.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef void* (*malloc_fn)(size_t);
typedef void* (*calloc_fn)(size_t, size_t);
typedef void* (*realloc_fn)(void*, size_t);
typedef void (*free_fn)(void*);
typedef void* (*mmap_fn)(void*, size_t, int, int, int, off_t);
typedef int (*munmap_fn)(void*, size_t);
typedef void* (*dlsym_fn)(void*, const char*);

static malloc_fn next_malloc;
static calloc_fn next_calloc;
static realloc_fn next_realloc;
static free_fn next_free;
static mmap_fn next_mmap;
static munmap_fn next_munmap;
static dlsym_fn next_dlsym;
static atomic_long n_malloc, n_free, n_mmap, n_munmap, n_dlsym;
static atomic_int resolving;

/* dlsym itself allocates (calloc for its error state) while we resolve: those
 * first allocations come from a static arena and are never freed. */
static char arena[64 * 1024];
static atomic_size_t arena_used;
static int in_arena(const void* p) { return (const char*)p >= arena && (const char*)p < arena + sizeof arena; }
static void* arena_alloc(size_t n) {
  size_t at = atomic_fetch_add(&arena_used, (n + 15) & ~(size_t)15);
  return at + n <= sizeof arena ? arena + at : NULL;
}

static void resolve(void) {
  if (next_free) return;
  atomic_store(&resolving, 1);
  /* dlsym's own next definition: dlvsym takes no hook of ours. */
  next_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!next_dlsym) next_dlsym = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  next_malloc = (malloc_fn)next_dlsym(RTLD_NEXT, "malloc");
  next_calloc = (calloc_fn)next_dlsym(RTLD_NEXT, "calloc");
  next_realloc = (realloc_fn)next_dlsym(RTLD_NEXT, "realloc");
  next_mmap = (mmap_fn)next_dlsym(RTLD_NEXT, "mmap");
  next_munmap = (munmap_fn)next_dlsym(RTLD_NEXT, "munmap");
  next_free = (free_fn)next_dlsym(RTLD_NEXT, "free");
  atomic_store(&resolving, 0);
}

void* malloc(size_t n) {
  if (!next_malloc) {
    if (atomic_load(&resolving)) return arena_alloc(n);
    resolve();
  }
  atomic_fetch_add(&n_malloc, 1);
  return next_malloc(n);
}

void* calloc(size_t a, size_t b) {
  if (!next_calloc) {
    if (atomic_load(&resolving)) return arena_alloc(a * b); /* the arena is zeroed */
    resolve();
  }
  atomic_fetch_add(&n_malloc, 1);
  return next_calloc(a, b);
}

void* realloc(void* p, size_t n) {
  if (!next_realloc) resolve();
  if (in_arena(p)) {
    void* q = malloc(n);
    size_t left = (size_t)(arena + sizeof arena - (char*)p);
    if (q) memcpy(q, p, n < left ? n : left); /* the block's size is unknown: never past the arena */
    return q;
  }
  atomic_fetch_add(&n_malloc, 1);
  return next_realloc(p, n);
}

void free(void* p) {
  if (!p || in_arena(p)) return;
  if (!next_free) resolve();
  atomic_fetch_add(&n_free, 1);
  next_free(p);
}

void* mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  if (!next_mmap) resolve();
  atomic_fetch_add(&n_mmap, 1);
  return next_mmap(addr, len, prot, flags, fd, off);
}

int munmap(void* addr, size_t len) {
  if (!next_munmap) resolve();
  atomic_fetch_add(&n_munmap, 1);
  return next_munmap(addr, len);
}

void* dlsym(void* handle, const char* name) {
  if (!next_dlsym) resolve();
  atomic_fetch_add(&n_dlsym, 1);
  /* RTLD_NEXT from here would mean "after wrap_alloc", not after our caller:
   * as the real wrappers do, answer it from the caller's view is impossible,
   * so pass it on unchanged. */
  return next_dlsym(handle, name);
}

__attribute__((destructor)) static void report(void) {
  if (atomic_load(&n_malloc) + atomic_load(&n_mmap) + atomic_load(&n_dlsym) == 0) return;
  char line[160];
  int len = snprintf(line, sizeof line, "wrap_alloc: active (malloc %ld, free %ld, mmap %ld, munmap %ld, dlsym %ld)\n",
                     atomic_load(&n_malloc), atomic_load(&n_free), atomic_load(&n_mmap), atomic_load(&n_munmap),
                     atomic_load(&n_dlsym));
  if (len > 0 && write(2, line, (size_t)len) < 0) return;
}

/* Loaded with dlopen (RTLD_LOCAL), as a Python extension module or a plugin
 * that wraps libc would be: its RTLD_NEXT lookups must find libc's functions
 * and work. Returns 0 when they do. */
int wrap_alloc_selftest(void) {
  dlsym_fn d = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!d) d = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  malloc_fn m = (malloc_fn)dlsym(RTLD_NEXT, "malloc");
  free_fn f = (free_fn)dlsym(RTLD_NEXT, "free");
  mmap_fn mm = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
  munmap_fn mu = (munmap_fn)dlsym(RTLD_NEXT, "munmap");
  if (!d || !m || !f || !mm || !mu) return 1;
  if (d(RTLD_NEXT, "no_such_symbol_wrap_alloc") != NULL || dlerror() == NULL) return 2;
  char* p = (char*)m(1 << 20);
  if (!p) return 3;
  memset(p, 7, 1 << 20);
  f(p);
  void* q = mm(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (q == MAP_FAILED) return 4;
  memset(q, 1, 1 << 20);
  return mu(q, 1 << 20) == 0 ? 0 : 5;
}
