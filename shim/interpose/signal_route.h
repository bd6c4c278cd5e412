// What the shim does with the signals that end a process by default
// (interpose/signal_hooks.cpp): pure decisions, unit-tested.
//
// SIGTERM, SIGINT, SIGHUP and SIGPIPE end a process without an exit handler
// when their disposition is the default, and the trace lost what the writer had not
// written yet and its End block: a multiprocessing Pool's workers (its exit
// terminates them), a job stopped by its scheduler, a C++ program's Ctrl-C,
// a C++ program whose output pipe closed (`| head`).
// Once a process records, the shim holds each of them whose disposition is
// still the default: its handler has the trace finished, puts the default
// back and raises the signal again, so the process ends as it would have.
// The app never sees the handler: a hooked sigaction or signal answers the
// disposition the app last set (the default), and the app's own handler
// replaces the shim's.
#pragma once

#include <signal.h>

namespace cuxfer::shim {

// The signals the shim may hold.
inline constexpr int kEndSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE};

// The index of `sig` in kEndSignals, or -1.
constexpr int end_signal_index(int sig) {
  for (int i = 0; i < static_cast<int>(sizeof kEndSignals / sizeof kEndSignals[0]); ++i)
    if (kEndSignals[i] == sig) return i;
  return -1;
}

// Whether a disposition leaves the signal's default action (termination) in
// place: SIG_DFL without SA_SIGINFO. Only then does the shim hold it. Inline:
// the hooks' fast path calls nothing (a TSan build's runs before TSan can).
inline bool is_default_disposition(const struct sigaction& a) {
  return !(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_DFL;
}

// How a hooked sigaction (or signal) call goes.
enum class SigactionRoute {
  PassThrough,  // not a signal the shim holds now: the real call
  Answer,       // the shim holds it and the app asks or sets the default: answered from the app's view
  Release,      // the app sets a handler or SIG_IGN: the shim lets go and the real call installs it
  Take,         // the app puts the default back while the process records: the shim holds it from now
};

// `held`: the shim's handler is the signal's disposition (checked against the
// real one); `act`: what the app sets, or null for a query; `holding`: the
// process records and the shim holds these signals (CUXFER_FINISH_ON_SIGNAL).
SigactionRoute route_sigaction(int sig, bool held, const struct sigaction* act, bool holding);

}  // namespace cuxfer::shim
