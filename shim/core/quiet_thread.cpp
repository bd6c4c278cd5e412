#include "core/quiet_thread.h"

#include <pthread.h>
#include <signal.h>

namespace cuxfer::shim {
namespace {

struct Start {
  void (*fn)(void*);
  void* arg;
};

void* run(void* p) {
  Start s = *static_cast<Start*>(p);
  delete static_cast<Start*>(p);
  s.fn(s.arg);
  return nullptr;
}

// pthread_create with every signal blocked in the new thread: it inherits the
// creator's mask, so block everything around the call only and restore the
// app thread's own mask.
bool create(void (*fn)(void*), void* arg, bool detached, pthread_t* out) {
  Start* s = new (std::nothrow) Start{fn, arg};
  if (!s) return false;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  if (detached) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  const int r = pthread_create(&t, &attr, run, s);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (r != 0) {
    delete s;
    return false;
  }
  if (out) *out = t;
  return true;
}

}  // namespace

bool start_quiet_thread(void (*fn)(void*), void* arg) { return create(fn, arg, true, nullptr); }

bool QuietThread::start_raw(void (*fn)(void*), void* arg) { return create(fn, arg, false, &thread_); }

}  // namespace cuxfer::shim
