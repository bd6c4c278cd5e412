/* copy_forever(copy, dst, src, n, started): calls copy(dst, src, n, H2D)
 * until one fails (then returns its status), adding 1 to *started after the
 * first. For testapps/python/finalize_copies.py: called through ctypes (the
 * GIL released for the whole call), a thread copies on with its Python frame
 * at the call while the interpreter finalizes, and never takes the GIL back.
 * A daemon thread that takes the GIL back after finalization may crash
 * CPython 3.10-3.13 itself (CPython gh-87135), the likelier the longer the
 * process's exit handlers run: not what the test is about. */
#include <stddef.h>

typedef int (*copy_fn)(void* dst, const void* src, size_t n, int kind);

int copy_forever(copy_fn copy, void* dst, const void* src, size_t n, int* started) {
  int status = copy(dst, src, n, 1 /* cudaMemcpyHostToDevice */);
  __atomic_add_fetch(started, 1, __ATOMIC_RELEASE);
  while (status == 0) status = copy(dst, src, n, 1);
  return status;
}
