// Threads the shim starts inside the app's process. Each is created with
// every signal blocked, so that the app's handlers (SIGALRM timers, SIGCHLD,
// SIGUSR1 ...) keep running on the app's own threads and never on ours, as
// heaptrack does; and creation failure is a value, never an exception.
#pragma once

#include <new>
#include <utility>

namespace cuxfer::shim {

// Starts fn(arg) on a detached thread with all signals blocked. False when
// no thread could be made (the caller then falls back, and says so).
bool start_quiet_thread(void (*fn)(void*), void* arg);

// The same for a callable, moved to the heap without throwing.
template <typename F>
bool spawn_quiet_thread(F&& f) {
  using Fn = std::decay_t<F>;
  Fn* held = new (std::nothrow) Fn(std::forward<F>(f));
  if (!held) return false;
  auto trampoline = [](void* p) {
    Fn* fn = static_cast<Fn*>(p);
    (*fn)();
    delete fn;
  };
  if (start_quiet_thread(trampoline, held)) return true;
  delete held;
  return false;
}

}  // namespace cuxfer::shim
