// Threads the shim starts inside the app's process. Each is created with
// every signal blocked, so that the app's handlers (SIGALRM timers, SIGCHLD,
// SIGUSR1 ...) keep running on the app's own threads and never on ours, as
// heaptrack does; and creation failure is a value, never an exception.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <new>
#include <type_traits>
#include <utility>

namespace cuxfer::shim {

// Starts fn(arg) on a detached thread with all signals blocked. False when
// no thread could be made (the caller then falls back, and says so).
bool start_quiet_thread(void (*fn)(void*), void* arg);

namespace detail {
// Moves `f` to the heap without throwing and hands it to
// `start(trampoline, held)`; the thread runs it and deletes it. False, with
// nothing left behind, when either step fails.
template <typename F, typename Start>
bool start_held(F&& f, Start&& start) {
  using Fn = std::decay_t<F>;
  Fn* held = new (std::nothrow) Fn(std::forward<F>(f));
  if (!held) return false;
  auto trampoline = [](void* p) {
    Fn* fn = static_cast<Fn*>(p);
    (*fn)();
    delete fn;
  };
  if (start(+trampoline, static_cast<void*>(held))) return true;
  delete held;
  return false;
}
}  // namespace detail

// The same for a callable, moved to the heap without throwing.
template <typename F>
bool spawn_quiet_thread(F&& f) {
  return detail::start_held(std::forward<F>(f), start_quiet_thread);
}

// Every signal blocked on the calling thread for the scope's life: threads a
// library creates inside it (CUPTI's, when the collector starts it) inherit
// the mask, as ours do.
class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old_);
  }
  ~AllSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

// A joinable quiet thread: started with every signal blocked; a failure to
// start is a value. Never copied; join() before it is destroyed (or leave it,
// as a fork child leaves its parent's).
class QuietThread {
 public:
  QuietThread() = default;
  QuietThread(const QuietThread&) = delete;
  QuietThread& operator=(const QuietThread&) = delete;
  QuietThread(QuietThread&& o) noexcept : thread_(o.thread_), started_(o.started_) { o.started_ = false; }

  template <typename F>
  bool start(F&& f) {
    started_ = detail::start_held(std::forward<F>(f), [this](void (*fn)(void*), void* arg) { return start_raw(fn, arg); });
    return started_;
  }
  bool joinable() const { return started_; }
  void join() {
    if (started_) pthread_join(thread_, nullptr);
    started_ = false;
  }
  // Fork child: the thread does not exist here; forget it without joining.
  void forget() { started_ = false; }
  // Called by the thread itself when nobody will join it (the process ends
  // through _exit once it is done): its end is reclaimed without a join.
  // Its owner must then never join() it.
  static void detach_self() { pthread_detach(pthread_self()); }

 private:
  bool start_raw(void (*fn)(void*), void* arg);
  pthread_t thread_{};
  bool started_ = false;
};

}  // namespace cuxfer::shim
