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

}  // namespace

bool start_quiet_thread(void (*fn)(void*), void* arg) {
  Start* s = new (std::nothrow) Start{fn, arg};
  if (!s) return false;
  sigset_t all, old;
  sigfillset(&all);
  // The new thread inherits the creator's mask: block everything around
  // pthread_create only, then restore the app thread's own mask.
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t t;
  const int r = pthread_create(&t, &attr, run, s);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (r != 0) {
    delete s;
    return false;
  }
  return true;
}

}  // namespace cuxfer::shim
