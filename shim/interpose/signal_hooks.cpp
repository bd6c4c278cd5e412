// SIGTERM, SIGINT, SIGHUP and SIGPIPE at their default action end a process
// without running an exit handler: the trace lost what the writer had not
// written yet, and its End block, and was reported as killed or crashed.
// That is how a multiprocessing Pool's workers end (the pool's exit
// terminates them: every copy of a short task lost), how a scheduler stops a
// job, how Ctrl-C stops a C++ program, and how one whose output pipe closed
// (`| head`) dies when it writes on. Once the process records, the shim holds
// each of these signals whose disposition is still the default
// (interpose/signal_route.h): its handler has the trace finished as for
// _exit (record/recorder.h, finish_before_signal: bounded, async-signal-safe
// on this side), puts the default back and raises the signal again, so the
// process ends as it would have, with the same status for its parent.
//
// The app never sees the handler. sigaction and signal (and bsd_signal,
// sysv_signal) are hooked: for a held signal a query answers the disposition
// the app last set (the default), setting the default is remembered, and
// setting a handler or SIG_IGN lets the shim's go and installs the app's. An
// app that puts the default back later (it caught SIGTERM for a while) has
// the signal held again. A disposition changed behind the hooks (a raw
// system call, sigset) is seen before each answer: the shim then lets go. A
// signal the app blocks (to take it with sigwait or signalfd) never reaches
// the handler. CUXFER_FINISH_ON_SIGNAL=0 holds nothing.
//
// The real functions are looked up when the shim loads; the hooks' own state
// changes with every signal blocked on the changing thread, so no handler
// that calls sigaction can interrupt it and wait on it.
#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "core/export.h"
#include "interpose/signal_hooks.h"
#include "interpose/signal_route.h"
#include "record/recorder.h"
#include "symbols/symbol_table.h"

namespace {

using cuxfer::shim::end_signal_index;
using cuxfer::shim::kEndSignals;
using cuxfer::shim::SigactionRoute;

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
using SignalFn = sighandler_t (*)(int, sighandler_t);

SigactionFn g_sigaction = nullptr;
SignalFn g_signal = nullptr, g_bsd_signal = nullptr, g_sysv_signal = nullptr;
bool g_hold = false;
// The process that records (hold_end_signals ran in it): a fork child holds
// nothing anew until it records itself, nor does a vfork child.
std::atomic<int> g_recording_pid{0};

bool holding() { return g_hold && g_recording_pid.load(std::memory_order_acquire) == static_cast<int>(getpid()); }

constexpr int kCount = sizeof kEndSignals / sizeof kEndSignals[0];
struct Held {
  std::atomic<bool> held{false};  // the shim's handler is (or is being made) the disposition
  struct sigaction view {};       // what the app last set: the default
};
Held g_held[kCount];
// An end signal's handler is finishing the trace. A second end signal in that
// time (`timeout` sends SIGTERM to the whole process group and `cuxfer
// record` forwards its own copy: two deliveries) reaches another thread,
// since the first thread blocks it while its handler runs; that thread waits
// for the same finish before the signal may end the process.
std::atomic<bool> g_finishing{false};
// The pid of the process whose thread changes the state, 0 when none: a fork
// child inherits a taken word from a thread it does not have, and takes it
// over instead of waiting for ever.
std::atomic<int> g_busy{0};

template <typename F>
F libc_function(const char* name) {
#if defined(CUXFER_DLSYM_ENTRY_ASM)
  // A ThreadSanitizer build: TSan's start-up calls sigaction (ours: the
  // shim comes first) before TSan can run instrumented code, so this file is
  // built uninstrumented and looks up through the exported dlsym, whose entry
  // is uninstrumented too (dlsym_entry_tsan.cpp): the next sigaction is
  // TSan's interceptor, as without the shim.
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
#else
  return cuxfer::shim::next_function<F>(name);
#endif
}

SigactionFn real_sigaction() {
  if (!g_sigaction) g_sigaction = libc_function<SigactionFn>("sigaction");  // before the constructor ran
  return g_sigaction;
}

// The hooks' state, changed by one thread at a time with all of its signals
// blocked (a handler on this thread cannot come in and wait for it).
class StateGuard {
 public:
  StateGuard() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved_);
    const int me = static_cast<int>(getpid());
    for (int holder = 0; !g_busy.compare_exchange_weak(holder, me, std::memory_order_acquire);) {
      if (holder != 0 && holder != me) continue;  // a fork's leftover: retried against that pid, taken over
      holder = 0;
    }
  }
  ~StateGuard() {
    g_busy.store(0, std::memory_order_release);
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  StateGuard(const StateGuard&) = delete;
  StateGuard& operator=(const StateGuard&) = delete;

 private:
  sigset_t saved_;
};

void on_end_signal(int sig);

// Whether the shim still holds signal i: its flag, and the real disposition
// is its handler (a raw system call or sigset may have replaced it). Under
// the guard.
bool still_held(int i) {
  if (!g_held[i].held.load(std::memory_order_acquire)) return false;
  struct sigaction now {};
  if (real_sigaction()(kEndSignals[i], nullptr, &now) == 0 && now.sa_handler == on_end_signal) return true;
  g_held[i].held.store(false, std::memory_order_release);
  return false;
}

void on_end_signal(int sig) {
  const int saved_errno = errno;
  const int i = end_signal_index(sig);
  if (i >= 0 && g_held[i].held.exchange(false, std::memory_order_acq_rel)) {
    g_finishing.store(true, std::memory_order_release);
    cuxfer::shim::Recorder::instance().finish_before_signal(sig);
    real_sigaction()(sig, &g_held[i].view, nullptr);
  } else if (i >= 0 && g_finishing.load(std::memory_order_acquire)) {
    // Another thread's handler is finishing the trace: wait for it (bounded,
    // as its own wait), then end the process as the signal would.
    cuxfer::shim::Recorder::instance().finish_before_signal(sig);
    struct sigaction now {};
    if (real_sigaction()(sig, nullptr, &now) == 0 && now.sa_handler == on_end_signal)
      real_sigaction()(sig, &g_held[i].view, nullptr);
  } else if (i >= 0) {
    // Not held, yet this handler ran: the app is putting its own in place
    // this instant, or a fork cut that short. Raised again to this handler
    // the signal would come back for ever: the app's view (the default)
    // goes in first unless the app's handler already did.
    struct sigaction now {};
    if (real_sigaction()(sig, nullptr, &now) == 0 && now.sa_handler == on_end_signal)
      real_sigaction()(sig, &g_held[i].view, nullptr);
  }
  // Blocked while this handler runs: pending, and taken at its default
  // action (or by the handler the app just set) when the handler returns.
  raise(sig);
  errno = saved_errno;
}

// Puts the shim's handler on signal i, whose app's view is `view` (a
// default). Under the guard. False (nothing held) if the kernel refused.
bool take(int i, const struct sigaction& view) {
  g_held[i].view = view;
  // Held before the handler is in place: a signal between the two finds the
  // flag set and ends the process properly.
  g_held[i].held.store(true, std::memory_order_release);
  struct sigaction ours {};
  ours.sa_handler = on_end_signal;
  sigfillset(&ours.sa_mask);
  ours.sa_flags = SA_RESTART;
  if (real_sigaction()(kEndSignals[i], &ours, nullptr) == 0) return true;
  g_held[i].held.store(false, std::memory_order_release);
  return false;
}

// Whether a call may change how the shim holds signal i (else the real call
// alone): it holds it, or the app puts its default back while recording.
bool concerns_us(int i, bool sets_default) {
  return i >= 0 && (g_held[i].held.load(std::memory_order_acquire) || (sets_default && holding()));
}

// signal(), bsd_signal() and sysv_signal() as sigaction with their flags.
sighandler_t set_handler(SignalFn real, const char* name, int sig, sighandler_t handler, int flags) {
  if (!real) real = libc_function<SignalFn>(name);
  const int i = end_signal_index(sig);
  if (!concerns_us(i, handler == SIG_DFL)) return real(sig, handler);
  StateGuard guard;
  struct sigaction act {};
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  act.sa_flags = flags;
  switch (cuxfer::shim::route_sigaction(sig, still_held(i), &act, holding())) {
    case SigactionRoute::PassThrough: return real(sig, handler);
    case SigactionRoute::Take: {
      struct sigaction now {};
      if (real_sigaction()(sig, nullptr, &now) != 0) return real(sig, handler);
      if (!take(i, act)) return real(sig, handler);
      return now.sa_handler;  // as glibc's signal() answers, SA_SIGINFO or not
    }
    case SigactionRoute::Answer: {
      const sighandler_t previous = g_held[i].view.sa_handler;
      g_held[i].view = act;
      return previous;
    }
    case SigactionRoute::Release: {
      const sighandler_t previous = g_held[i].view.sa_handler;
      g_held[i].held.store(false, std::memory_order_release);
      if (real(sig, handler) == SIG_ERR) {
        g_held[i].held.store(true, std::memory_order_release);
        return SIG_ERR;
      }
      return previous;
    }
  }
  return real(sig, handler);
}

}  // namespace

namespace cuxfer::shim {

void resolve_signal_hooks(bool hold) {
  g_sigaction = libc_function<SigactionFn>("sigaction");
  g_signal = libc_function<SignalFn>("signal");
  g_bsd_signal = libc_function<SignalFn>("bsd_signal");
  g_sysv_signal = libc_function<SignalFn>("sysv_signal");
  g_hold = hold && g_sigaction != nullptr;
}

void hold_end_signals() {
  if (!g_hold) return;
  StateGuard guard;
  g_recording_pid.store(static_cast<int>(getpid()), std::memory_order_release);
  for (int i = 0; i < kCount; ++i) {
    if (g_held[i].held.load(std::memory_order_acquire)) continue;  // a fork child: its parent's, inherited
    struct sigaction now {};
    if (g_sigaction(kEndSignals[i], nullptr, &now) != 0 || !cuxfer::shim::is_default_disposition(now)) continue;
    take(i, now);
  }
}

}  // namespace cuxfer::shim

extern "C" CUXFER_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  const int i = end_signal_index(sig);
  if (!concerns_us(i, i >= 0 && act && cuxfer::shim::is_default_disposition(*act)))
    return real_sigaction()(sig, act, old);
  StateGuard guard;
  switch (cuxfer::shim::route_sigaction(sig, still_held(i), act, holding())) {
    case SigactionRoute::PassThrough: return real_sigaction()(sig, act, old);
    case SigactionRoute::Take: {
      struct sigaction now {};
      if (real_sigaction()(sig, nullptr, &now) != 0 || !take(i, *act)) return real_sigaction()(sig, act, old);
      if (old) *old = now;
      return 0;
    }
    case SigactionRoute::Answer: {
      // `act` and `old` may be one struct: read the one before writing the other.
      const struct sigaction previous = g_held[i].view;
      if (act) g_held[i].view = *act;
      if (old) *old = previous;
      return 0;
    }
    case SigactionRoute::Release: {
      const struct sigaction view = g_held[i].view;
      g_held[i].held.store(false, std::memory_order_release);
      if (real_sigaction()(sig, act, nullptr) != 0) {
        const int e = errno;
        g_held[i].held.store(true, std::memory_order_release);
        errno = e;
        return -1;
      }
      if (old) *old = view;
      return 0;
    }
  }
  return real_sigaction()(sig, act, old);
}

extern "C" CUXFER_EXPORT sighandler_t signal(int sig, sighandler_t handler) {
  return set_handler(g_signal, "signal", sig, handler, SA_RESTART);
}

extern "C" CUXFER_EXPORT sighandler_t bsd_signal(int sig, sighandler_t handler) {
  return set_handler(g_bsd_signal, "bsd_signal", sig, handler, SA_RESTART);
}

extern "C" CUXFER_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler) {
  return set_handler(g_sysv_signal, "sysv_signal", sig, handler, SA_RESETHAND | SA_NODEFER);
}
