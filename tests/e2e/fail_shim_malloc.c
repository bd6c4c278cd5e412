/* Preloaded first (before libcuxfer.so and libcuxfer_memhooks.so) by
 * e2e.faults.out_of_memory: malloc and its kin fail (return NULL, errno
 * ENOMEM) when called from libcuxfer.so's own code, as in a process whose
 * memory is spent, while the app's allocations keep working. Others go to the
 * next definition (the libc hooks when preloaded, so registrations stay
 * honest).
 *
 *   FAIL_SHIM_MALLOC=N      the shim's first N allocations succeed, every
 *                           later one fails (0: all fail)
 *   FAIL_SHIM_MALLOC=count  none fails
 * At exit (this library's destructor: the shim may still allocate after it)
 * it prints "fail_shim_malloc: N shim allocations, F failed".
 *
 * The shim's code is found in /proc/self/maps (read with system calls only:
 * this runs inside malloc). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);

static atomic_uintptr_t g_lo, g_hi;  /* libcuxfer.so's executable mapping */
static atomic_long g_seen, g_failed;
static long g_after = -2;            /* -2 unread, -1 off / counting */
static int g_counting;

static void find_shim(void) {
  static char buf[1 << 16];
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n, len = 0;
  while (len < (ssize_t)sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) > 0) len += n;
  close(fd);
  buf[len] = 0;
  for (char* line = buf; line && *line;) {
    char* next = strchr(line, '\n');
    if (next) *next++ = 0;
    if (strstr(line, "libcuxfer.so") && strstr(line, " r-xp ")) {
      uintptr_t lo = strtoull(line, NULL, 16), hi = strtoull(strchr(line, '-') + 1, NULL, 16);
      atomic_store(&g_lo, lo);
      atomic_store(&g_hi, hi);
      return;
    }
    line = next;
  }
}

static int should_fail(void* caller) {
  if (g_after == -2) {
    const char* v = getenv("FAIL_SHIM_MALLOC");
    g_counting = v && strcmp(v, "count") == 0;
    g_after = v && !g_counting ? atol(v) : -1;
  }
  if (g_after == -1 && !g_counting) return 0;
  if (!atomic_load(&g_hi)) find_shim();
  uintptr_t a = (uintptr_t)caller;
  if (!(a >= atomic_load(&g_lo) && a < atomic_load(&g_hi))) return 0;
  long seen = atomic_fetch_add(&g_seen, 1);
  if (g_counting || seen < g_after) return 0;
  atomic_fetch_add(&g_failed, 1);
  return 1;
}

__attribute__((destructor)) static void report(void) {
  if (g_counting || g_after >= 0) {
    char line[96];
    int n = snprintf(line, sizeof line, "fail_shim_malloc: %ld shim allocations, %ld failed\n", atomic_load(&g_seen),
                     atomic_load(&g_failed));
    ssize_t ignored = write(STDERR_FILENO, line, (size_t)n);
    (void)ignored;
  }
}

#define FAIL_IF_SHIM()                              \
  do {                                              \
    if (should_fail(__builtin_return_address(0))) { \
      errno = ENOMEM;                               \
      return NULL;                                  \
    }                                               \
  } while (0)

/* The next definition of each, found once; while dlsym itself allocates
 * (it may), libc's own serves. */
static __thread int t_resolving;
typedef void* (*size_fn)(size_t);
typedef void* (*pair_fn)(size_t, size_t);
typedef void* (*realloc_fn)(void*, size_t);
typedef int (*posix_memalign_fn)(void**, size_t, size_t);
#define NEXT(type, name, fallback)                         \
  static type next_##name;                                 \
  if (!next_##name) {                                      \
    if (t_resolving) return fallback;                      \
    t_resolving = 1;                                       \
    next_##name = (type)dlsym(RTLD_NEXT, #name);           \
    t_resolving = 0;                                       \
    if (!next_##name) return fallback;                     \
  }

void* malloc(size_t n) {
  FAIL_IF_SHIM();
  NEXT(size_fn, malloc, __libc_malloc(n));
  return next_malloc(n);
}
void* calloc(size_t k, size_t n) {
  FAIL_IF_SHIM();
  NEXT(pair_fn, calloc, __libc_calloc(k, n));
  return next_calloc(k, n);
}
void* realloc(void* p, size_t n) {
  FAIL_IF_SHIM();
  NEXT(realloc_fn, realloc, __libc_realloc(p, n));
  return next_realloc(p, n);
}
void* aligned_alloc(size_t a, size_t n) {
  FAIL_IF_SHIM();
  NEXT(pair_fn, aligned_alloc, __libc_memalign(a, n));
  return next_aligned_alloc(a, n);
}
void* memalign(size_t a, size_t n) {
  FAIL_IF_SHIM();
  NEXT(pair_fn, memalign, __libc_memalign(a, n));
  return next_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  if (should_fail(__builtin_return_address(0))) return ENOMEM;
  NEXT(posix_memalign_fn, posix_memalign, ((*out = __libc_memalign(a, n)) ? 0 : ENOMEM));
  return next_posix_memalign(out, a, n);
}
