// interpose/signal_route.h: which signals the shim may hold, and how a hooked
// sigaction goes for each. (The hooks and the handler end to end:
// e2e.end_signals.)
#include <gtest/gtest.h>

#include <signal.h>

#include "interpose/signal_route.h"

namespace cuxfer::shim {
namespace {

struct sigaction action(sighandler_t h, int flags = 0) {
  struct sigaction a {};
  a.sa_handler = h;
  a.sa_flags = flags;
  sigemptyset(&a.sa_mask);
  return a;
}

void handler(int) {}
void info_handler(int, siginfo_t*, void*) {}

TEST(SignalRoute, OnlyTheSignalsThatEndAProcessWithoutAnExitHandler) {
  EXPECT_GE(end_signal_index(SIGTERM), 0);
  EXPECT_GE(end_signal_index(SIGINT), 0);
  EXPECT_GE(end_signal_index(SIGHUP), 0);
  EXPECT_GE(end_signal_index(SIGPIPE), 0);  // a C++ program whose output pipe closed
  // Not SIGKILL (cannot be caught), not the ones whose default dumps core
  // (the crash stays a crash), not the app's everyday signals.
  for (int sig : {SIGKILL, SIGQUIT, SIGABRT, SIGSEGV, SIGUSR1, SIGALRM, SIGCHLD, 0, 65})
    EXPECT_EQ(end_signal_index(sig), -1) << sig;
}

TEST(SignalRoute, OnlyTheDefaultDispositionIsHeld) {
  EXPECT_TRUE(is_default_disposition(action(SIG_DFL)));
  EXPECT_TRUE(is_default_disposition(action(SIG_DFL, SA_RESTART)));
  EXPECT_FALSE(is_default_disposition(action(SIG_IGN)));
  EXPECT_FALSE(is_default_disposition(action(handler)));
  struct sigaction info {};
  info.sa_sigaction = info_handler;
  info.sa_flags = SA_SIGINFO;
  EXPECT_FALSE(is_default_disposition(info));
}

TEST(SignalRoute, HeldSignalsAreAnsweredUntilTheAppSetsItsOwn) {
  const struct sigaction dfl = action(SIG_DFL), ign = action(SIG_IGN), mine = action(handler);
  // A query, or the default set again: answered from the app's view.
  EXPECT_EQ(route_sigaction(SIGTERM, true, nullptr, true), SigactionRoute::Answer);
  EXPECT_EQ(route_sigaction(SIGTERM, true, &dfl, true), SigactionRoute::Answer);
  // A handler, or ignoring it: the app's from now on.
  EXPECT_EQ(route_sigaction(SIGTERM, true, &mine, true), SigactionRoute::Release);
  EXPECT_EQ(route_sigaction(SIGINT, true, &ign, true), SigactionRoute::Release);
  struct sigaction info {};
  info.sa_sigaction = info_handler;
  info.sa_flags = SA_SIGINFO;
  EXPECT_EQ(route_sigaction(SIGHUP, true, &info, true), SigactionRoute::Release);
}

TEST(SignalRoute, TheDefaultPutBackIsHeldAgainWhileRecording) {
  // An app that caught SIGTERM for a while (before or after the process
  // began to record) and puts the default back: held from then on.
  const struct sigaction dfl = action(SIG_DFL), mine = action(handler);
  EXPECT_EQ(route_sigaction(SIGTERM, false, &dfl, true), SigactionRoute::Take);
  EXPECT_EQ(route_sigaction(SIGHUP, false, &dfl, true), SigactionRoute::Take);
  // Not recording (or CUXFER_FINISH_ON_SIGNAL=0, or a vfork child): the real call.
  EXPECT_EQ(route_sigaction(SIGTERM, false, &dfl, false), SigactionRoute::PassThrough);
  EXPECT_EQ(route_sigaction(SIGTERM, false, &mine, true), SigactionRoute::PassThrough);
  EXPECT_EQ(route_sigaction(SIGTERM, false, nullptr, true), SigactionRoute::PassThrough);
}

TEST(SignalRoute, EverythingElsePassesThrough) {
  const struct sigaction mine = action(handler), dfl = action(SIG_DFL);
  EXPECT_EQ(route_sigaction(SIGTERM, false, nullptr, false), SigactionRoute::PassThrough);  // not held (any more)
  EXPECT_EQ(route_sigaction(SIGTERM, false, &mine, false), SigactionRoute::PassThrough);
  EXPECT_EQ(route_sigaction(SIGUSR1, true, &mine, true), SigactionRoute::PassThrough);  // never one of them
  EXPECT_EQ(route_sigaction(SIGCHLD, true, nullptr, true), SigactionRoute::PassThrough);
  EXPECT_EQ(route_sigaction(SIGUSR1, false, &dfl, true), SigactionRoute::PassThrough);
}

}  // namespace
}  // namespace cuxfer::shim
