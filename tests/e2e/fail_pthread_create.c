/* Preloaded by e2e.faults.no_threads: every pthread_create fails (EAGAIN),
 * as in a process at its thread limit. The shim must pass every call through
 * and say so once; the app, which starts no thread itself, must not notice. */
#include <errno.h>
#include <pthread.h>

int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  (void)thread;
  (void)attr;
  (void)start;
  (void)arg;
  return EAGAIN;
}
