// The registrar's queue and thread (rewrite/background_registrar.h), with
// requests whose completion the test controls. No driver: requests carry no
// context, so the thread binds none.
#include "rewrite/background_registrar.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace cuxfer::shim::rewrite {
namespace {

std::atomic<int> g_entered{0};
std::atomic<int> g_completed{0};
std::atomic<bool> g_hold{false};

// Completes a request, first waiting while the test holds it.
void complete_held(const RegistrationCache::Reservation&) {
  g_entered.fetch_add(1);
  while (g_hold.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  g_completed.fetch_add(1);
}

RegistrationCache::Reservation reservation() {
  RegistrationCache::Reservation r;
  r.ok = true;
  return r;
}

bool wait_entered(int n) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (g_entered.load() < n)
    if (std::chrono::steady_clock::now() > until) return false;
    else std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return true;
}

TEST(BackgroundRegistrar, CompletesQueuedRequestsOnItsThread) {
  g_hold = false;
  const int before = g_completed.load();
  ASSERT_TRUE(submit_registration(reservation(), nullptr, complete_held));
  ASSERT_TRUE(submit_registration(reservation(), nullptr, complete_held));
  EXPECT_TRUE(wait_registrations_idle(10'000));
  EXPECT_EQ(g_completed.load(), before + 2);
  EXPECT_FALSE(submit_registration(RegistrationCache::Reservation{}, nullptr, complete_held))
      << "a failed reservation is never queued";
}

// A fork while the registrar's thread is completing one request and another
// waits in the queue: the child has no such thread, so it must not inherit
// the parent's busy state and queue (a wait for them would time out, a new
// request would never run). It starts a registrar of its own.
TEST(BackgroundRegistrar, ForkedChildStartsItsOwn) {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer ends a child of a multi-threaded fork that starts a
  // thread (exit 66): the child's own registrar cannot run there.
  constexpr bool child_may_start_threads = false;
#else
  constexpr bool child_may_start_threads = true;
#endif
  const int entered = g_entered.load();
  g_hold = true;
  // Whatever happens below, the parent's registrar is let go at the end:
  // later tests in this process use it.
  struct Release {
    ~Release() {
      g_hold = false;
      wait_registrations_idle(10'000);
    }
  } release;
  ASSERT_TRUE(submit_registration(reservation(), nullptr, complete_held));
  ASSERT_TRUE(wait_entered(entered + 1));
  ASSERT_TRUE(submit_registration(reservation(), nullptr, complete_held));  // queued behind it
  fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    registrar_after_fork_child();
    g_hold = false;
    const int done = g_completed.load();
    int bad = 0;
    bad |= !wait_registrations_idle(0) << 0;  // nothing of the parent's left to wait for
    if (!child_may_start_threads) _exit(bad);
    bad |= !submit_registration(reservation(), nullptr, complete_held) << 1;
    bad |= !wait_registrations_idle(10'000) << 2;
    bad |= (g_completed.load() != done + 1) << 3;  // the child's own request, and only it
    _exit(bad);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed checks (bit mask)";
  g_hold = false;
  EXPECT_TRUE(wait_registrations_idle(10'000));
}

}  // namespace
}  // namespace cuxfer::shim::rewrite
