// GoneContexts: which contexts went since a thread last looked (zero copy's
// per-thread events are dropped only when their own context went).
#include "rewrite/gone_contexts.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <thread>
#include <vector>

namespace cuxfer::shim::rewrite {
namespace {

using Since = GoneContexts::Since;

const void* handle(uintptr_t v) { return reinterpret_cast<const void*>(v); }

TEST(GoneContexts, NothingGoneIsAlive) {
  GoneContexts gone;
  EXPECT_EQ(gone.generation(), 0u);
  EXPECT_EQ(gone.went(handle(0x1000), 0, gone.generation()), Since::Alive);
}

TEST(GoneContexts, AnotherContextGoingLeavesThisOneAlive) {
  GoneContexts gone;
  const uint64_t seen = gone.generation();
  gone.publish(handle(0x1000));
  gone.publish(handle(0x2000));
  EXPECT_EQ(gone.generation(), 2u);
  EXPECT_EQ(gone.went(handle(0x3000), seen, gone.generation()), Since::Alive);
  EXPECT_EQ(gone.went(handle(0x1000), seen, gone.generation()), Since::Gone);
  EXPECT_EQ(gone.went(handle(0x2000), seen, gone.generation()), Since::Gone);
}

// A context that went before the thread looked is not its context any more,
// even at the same address: a new one was made there.
TEST(GoneContexts, GenerationsNotAddressesDecide) {
  GoneContexts gone;
  gone.publish(handle(0x1000));
  // The thread made its event in the new context at 0x1000 after this.
  const uint64_t seen = gone.generation();
  gone.publish(handle(0x2000));
  EXPECT_EQ(gone.went(handle(0x1000), seen, gone.generation()), Since::Alive);
  gone.publish(handle(0x1000));  // the new one goes too
  EXPECT_EQ(gone.went(handle(0x1000), seen, gone.generation()), Since::Gone);
  // Only up to the generation the caller read.
  EXPECT_EQ(gone.went(handle(0x1000), seen, seen + 1), Since::Alive);
}

TEST(GoneContexts, UnknownHandleStandsForEveryContext) {
  GoneContexts gone;
  const uint64_t seen = gone.generation();
  gone.publish(nullptr);
  EXPECT_EQ(gone.went(handle(0x1000), seen, gone.generation()), Since::Gone);
  EXPECT_EQ(gone.went(handle(0x1000), gone.generation(), gone.generation()), Since::Alive);
}

TEST(GoneContexts, FallingMoreThanTheRingBehindIsSaid) {
  GoneContexts gone;
  const uint64_t seen = gone.generation();
  for (uint64_t i = 0; i < GoneContexts::kSlots; ++i) gone.publish(handle(0x10000 + i * 0x100));
  // Exactly the ring's worth behind: still known.
  EXPECT_EQ(gone.went(handle(0x1000), seen, gone.generation()), Since::Alive);
  gone.publish(handle(0x2000));
  EXPECT_EQ(gone.went(handle(0x1000), seen, gone.generation()), Since::TooFarBehind);
  EXPECT_EQ(gone.went(handle(0x1000), seen + 1, gone.generation()), Since::Alive);
  EXPECT_EQ(gone.went(handle(0x2000), seen + 1, gone.generation()), Since::Gone);
}

// Readers race writers that wrap the ring: a reader never calls its own
// context gone (it never is), and says TooFarBehind only where a slot it read
// was overwritten.
TEST(GoneContexts, ReadersRacingWritersNeverMisread) {
  GoneContexts gone;
  std::atomic<bool> stop{false};
  constexpr int kReaders = 3;
  std::vector<std::thread> readers;
  std::atomic<uint64_t> wrong{0}, asked{0};
  for (int r = 0; r < kReaders; ++r)
    readers.emplace_back([&, r] {
      const void* mine = handle(0x900000 + static_cast<uintptr_t>(r));
      uint64_t seen = gone.generation();
      while (!stop.load(std::memory_order_relaxed)) {
        const uint64_t upto = gone.generation();
        if (gone.went(mine, seen, upto) == Since::Gone) wrong.fetch_add(1);
        asked.fetch_add(1, std::memory_order_relaxed);
        seen = upto;
      }
    });
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w)
    writers.emplace_back([&, w] {
      for (uintptr_t i = 0; i < 20000; ++i)
        gone.publish(handle(0x1000 + (i % 97) * 0x10 + static_cast<uintptr_t>(w)));
    });
  for (auto& t : writers) t.join();
  stop.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(asked.load(), 0u);
  EXPECT_EQ(gone.generation(), 40000u);
}

// The destroy is made only while the context has not gone since the thread
// looked, and not at all once it has (or may have).
TEST(GoneContexts, DestroyUnlessGoneDecidesByGenerations) {
  GoneContexts gone;
  const uint64_t seen = gone.generation();
  int destroyed = 0;
  gone.publish(handle(0x2000));
  EXPECT_EQ(gone.destroy_unless_gone(handle(0x1000), seen, false, [&] { ++destroyed; }), 1u);
  EXPECT_EQ(destroyed, 1);
  gone.publish(handle(0x1000));
  gone.destroy_unless_gone(handle(0x1000), seen, false, [&] { ++destroyed; });
  EXPECT_EQ(destroyed, 1);  // went: dropped untouched
  gone.publish(nullptr);
  gone.destroy_unless_gone(handle(0x3000), seen + 2, false, [&] { ++destroyed; });
  EXPECT_EQ(destroyed, 1);  // an unknown handle went: maybe it
  const uint64_t far = gone.generation();
  for (uint64_t i = 0; i <= GoneContexts::kSlots; ++i) gone.publish(handle(0x4000));
  gone.destroy_unless_gone(handle(0x5000), far, false, [&] { ++destroyed; });
  EXPECT_EQ(destroyed, 1);  // too far behind to tell
}

// A publication never lands inside a destroy: a teardown that publishes while
// a thread is in its destroy waits for it, so the driver destroys the context
// only after the event (the publication comes before the driver's call).
TEST(GoneContexts, PublicationWaitsForADestroyInProgress) {
  GoneContexts gone;
  std::atomic<bool> inside{false}, finished{false}, published{false};
  std::thread dropper([&] {
    gone.destroy_unless_gone(handle(0x1000), gone.generation(), false, [&] {
      inside.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      EXPECT_FALSE(published.load());
      finished.store(true);
    });
  });
  while (!inside.load()) std::this_thread::yield();
  gone.publish(handle(0x1000));
  published.store(true);
  EXPECT_TRUE(finished.load());
  dropper.join();
}

// A fork while another thread is inside its destroy (holding the publishers'
// lock): the child, one thread, makes the lock anew and can publish; it did
// not, and a teardown hook in the child waited for ever.
TEST(GoneContexts, ForkChildPublishesWhileAParentThreadWasInsideADestroy) {
  GoneContexts gone;
  std::atomic<bool> inside{false}, release{false};
  std::thread dropper([&] {
    gone.destroy_unless_gone(handle(0x1000), gone.generation(), false, [&] {
      inside.store(true);
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  });
  while (!inside.load()) std::this_thread::yield();
  const pid_t pid = fork();
  if (pid == 0) {
    gone.after_fork_child();
    gone.publish(handle(0x1000));
    _exit(gone.generation() == 1 ? 0 : 2);
  }
  ASSERT_GT(pid, 0);
  int status = -1;
  pid_t done = 0;
  for (int i = 0; i < 2000 && done == 0; ++i) {  // 2 s at most
    done = waitpid(pid, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  release.store(true);
  dropper.join();
  EXPECT_NE(done, 0) << "the fork child's publish waited for a lock no thread of it holds";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// A context whose teardown (or release) is under way is bound by no one until
// it is done, whatever the generations say: a release learns it was the last
// only afterwards, and a free pushes the buffer's context.
TEST(GoneContexts, NothingOfAGoingContextIsPinnedOrDestroyed) {
  using Pin = GoneContexts::Pin;
  GoneContexts gone;
  int calls = 0;
  gone.going(handle(0x1000));
  EXPECT_EQ(gone.pin(handle(0x1000), false), Pin::Going);
  gone.destroy_unless_gone(handle(0x1000), gone.generation(), false, [&] { ++calls; });
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(gone.pin(handle(0x2000), false), Pin::Pinned);  // another context
  gone.unpin(handle(0x2000));
  gone.going(handle(0x1000));  // a second release of the same context at once
  gone.done_going(handle(0x1000));
  EXPECT_EQ(gone.pin(handle(0x1000), false), Pin::Going);
  gone.done_going(handle(0x1000));
  EXPECT_EQ(gone.pin(handle(0x1000), false), Pin::Pinned);  // a release that was not the last
  gone.unpin(handle(0x1000));
  gone.destroy_unless_gone(handle(0x1000), gone.generation(), false, [&] { ++calls; });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(gone.generation(), 0u);  // marking publishes nothing
}

TEST(GoneContexts, AnUnknownOrOneTooManyTeardownMakesEveryContextGoing) {
  using Pin = GoneContexts::Pin;
  GoneContexts gone;
  gone.going(nullptr);
  EXPECT_EQ(gone.pin(handle(0x1000), false), Pin::Going);
  gone.done_going(nullptr);
  EXPECT_EQ(gone.pin(handle(0x1000), false), Pin::Pinned);
  gone.unpin(handle(0x1000));
  // More teardowns at once than there are slots: the one past them stands
  // for every context until its own end.
  for (uintptr_t i = 1; i <= 17; ++i) gone.going(handle(0x1000 * (i + 1)));
  EXPECT_EQ(gone.pin(handle(0x99000), false), Pin::Going);
  for (uintptr_t i = 1; i <= 17; ++i) gone.done_going(handle(0x1000 * (i + 1)));
  EXPECT_EQ(gone.pin(handle(0x99000), false), Pin::Pinned);
  gone.unpin(handle(0x99000));
}

// A teardown waits for the calls pinned on its context, with the lock
// released (another context's calls go on meanwhile), and a pin asked for
// after its mark is refused.
TEST(GoneContexts, GoingWaitsForTheCallsPinnedOnItsContextOnly) {
  using Pin = GoneContexts::Pin;
  GoneContexts gone;
  ASSERT_EQ(gone.pin(handle(0x1000), false), Pin::Pinned);
  std::atomic<bool> marked{false};
  std::thread teardown([&] {
    gone.going(handle(0x1000));
    marked.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_FALSE(marked.load());  // waits for the pinned call
  EXPECT_EQ(gone.pin(handle(0x2000), false), Pin::Pinned);  // the lock is free: another context goes on
  gone.unpin(handle(0x2000));
  EXPECT_EQ(gone.pin(handle(0x1000), false), Pin::Going);  // no new call on the going one
  gone.unpin(handle(0x1000));
  teardown.join();
  EXPECT_TRUE(marked.load());
  gone.done_going(handle(0x1000));
}

// A call nested in a driver call made under the lock (an app's callback
// inside the shim's own cuEventDestroy) only tries the lock: it never waits
// for itself.
TEST(GoneContexts, ANestedCallOnlyTriesTheLock) {
  using Pin = GoneContexts::Pin;
  GoneContexts gone;
  int destroyed = 0;
  Pin nested_pin = Pin::Pinned;
  gone.destroy_unless_gone(handle(0x1000), gone.generation(), false, [&] {
    nested_pin = gone.pin(handle(0x2000), true);
    gone.destroy_unless_gone(handle(0x3000), gone.generation(), true, [&] { ++destroyed; });
  });
  EXPECT_EQ(nested_pin, Pin::Busy);
  EXPECT_EQ(destroyed, 0);
  EXPECT_EQ(gone.pin(handle(0x2000), true), Pin::Pinned);  // not held: pinned
  gone.unpin(handle(0x2000));
}

}  // namespace
}  // namespace cuxfer::shim::rewrite
