// walk() against glibc's backtrace (libgcc's unwinder, exact) on stacks of
// every shape the compiler gives: frame-pointer and frameless functions,
// alloca, deep recursion, libc frames (a qsort comparator), std::function,
// another thread, the same stack twice (the per-thread memo), the last walk
// replayed and refused when any word it read changed, and after a dlclose;
// the walk from a hook's frame, and from a frame that is not one. A signal handler's stack, on the thread's stack or an alternate
// one, is refused or right, never wrong.
#include <gtest/gtest.h>

#include <alloca.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "core/prefetch_trail.h"
#include "unwind/fast_unwind.h"

namespace cuxfer::shim::unwind {
namespace {

struct Both {
  bool walked = false;
  std::vector<uint64_t> fast, glibc;
};

// Both stacks from here: each one's first frame is its return address into
// capture_raw() (two call sites), and every frame after it is the same. No
// allocation: a signal handler calls it.
struct Raw {
  bool walked = false;
  uint32_t n = 0;
  int got = 0;
  uint64_t fast[64];
  void* glibc[70];
};

__attribute__((noinline)) void capture_raw(Raw& r) {
  init();
  r.walked = walk(r.fast, 64, 0, 0, &r.n);
  r.got = backtrace(r.glibc, 70);
  asm volatile("" ::: "memory");  // keep capture_raw a real frame (no tail call)
}

Both to_both(const Raw& r) {
  Both b;
  b.walked = r.walked;
  b.fast.assign(r.fast, r.fast + r.n);
  for (int i = 0; i < r.got; ++i) b.glibc.push_back(reinterpret_cast<uint64_t>(r.glibc[i]));
  return b;
}

__attribute__((noinline)) Both capture() {
  Raw r;
  capture_raw(r);
  return to_both(r);
}

void expect_same(const Both& b, const char* what) {
  ASSERT_TRUE(b.walked) << what;
  ASSERT_GE(b.fast.size(), 3u) << what;
  // Frame 0 differs by the call site in capture(). Under ASan, backtrace() is
  // an interceptor and reports its own frame first: glibc's frames are
  // matched from where the walk's frame 1 is, one or two entries in.
  size_t j = 1;
  while (j < 3 && j < b.glibc.size() && b.glibc[j] != b.fast[1]) ++j;
  ASSERT_LT(j, 3u) << what << ": the walk's frame 1 is not among glibc's first frames";
  ASSERT_GE(b.glibc.size() - j, b.fast.size() - 1) << what;
  for (size_t i = 1; i < b.fast.size(); ++i) EXPECT_EQ(b.fast[i], b.glibc[i - 1 + j]) << what << ": frame " << i;
  EXPECT_LE(b.glibc.size() - j, b.fast.size()) << what;  // glibc may end one frame later, at a null address
}

__attribute__((noinline, optimize("no-omit-frame-pointer"))) Both with_frame_pointer(int depth) {
  volatile int pad[8] = {depth};
  Both b = depth > 0 ? with_frame_pointer(depth - 1) : capture();
  asm volatile("" ::"r"(pad) : "memory");
  return b;
}

__attribute__((noinline, optimize("omit-frame-pointer"))) Both frameless(int depth) {
  volatile char pad[40] = {static_cast<char>(depth)};
  Both b = depth > 0 ? frameless(depth - 1) : capture();
  asm volatile("" ::"r"(pad) : "memory");
  return b;
}

__attribute__((noinline)) Both with_alloca(size_t n) {
  // A variable-sized frame: the compiler's CFA is rbp-based here.
  char* p = static_cast<char*>(alloca(n));
  std::memset(p, 1, n);
  Both b = capture();
  asm volatile("" ::"r"(p) : "memory");
  return b;
}

// Over-aligned locals and a variable-sized frame: the compiler realigns the
// stack through a DRAP register, and the CFA is an expression (the value saved
// at rbp - k), as in cuBLAS's code on a PyTorch copy's stack.
__attribute__((noinline)) Both realigned(size_t n) {
  alignas(64) volatile char over_aligned[64] = {1};
  char* p = static_cast<char*>(alloca(n));
  std::memset(p, 2, n);
  Both b = capture();
  asm volatile("" ::"r"(p), "r"(over_aligned) : "memory");
  return b;
}

__attribute__((noinline)) Both mixed(int depth) {
  if (depth % 3 == 0 && depth > 0) return with_frame_pointer(1);
  if (depth % 3 == 1) return frameless(2);
  return with_alloca(64 + depth * 16);
}

TEST(FastUnwind, FramePointerFunctions) { expect_same(with_frame_pointer(6), "frame pointers"); }
TEST(FastUnwind, FramelessFunctions) { expect_same(frameless(6), "frameless"); }
TEST(FastUnwind, AllocaMakesAnRbpBasedCfa) { expect_same(with_alloca(1000), "alloca"); }
TEST(FastUnwind, ThroughAFrameRealignedWithADrapRegister) {
  const Both b = realigned(200);
  expect_same(b, "realigned");
  // The stack holds a frame whose rule is the DRAP one (else this tested nothing).
  bool drap = false;
  for (const uint64_t pc : b.fast) drap = drap || lookup_rule(pc - 1).kind == FrameRule::Kind::RbpDeref;
  EXPECT_TRUE(drap) << "no frame of realigned() has a CFA read through rbp: the compiler did not realign";
}

TEST(FastUnwind, DeepRecursionMixed) {
  for (int d = 0; d < 9; ++d) expect_same(mixed(d), "mixed");
  expect_same(frameless(40), "40 frames");
}

Both g_from_qsort;
int compare_and_capture(const void* a, const void* b) {
  if (g_from_qsort.fast.empty()) g_from_qsort = capture();
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

TEST(FastUnwind, ThroughLibcFrames) {
  int v[] = {3, 1, 2};
  g_from_qsort = {};
  qsort(v, 3, sizeof v[0], compare_and_capture);
  expect_same(g_from_qsort, "qsort comparator");
}

TEST(FastUnwind, ThroughStdFunction) {
  std::function<Both()> f = [] { return frameless(2); };
  expect_same(f(), "std::function");
}

TEST(FastUnwind, OnAnotherThread) {
  Both b;
  std::thread([&] { b = with_alloca(300); }).join();
  expect_same(b, "thread");
  // The thread's walk ends at its start, as glibc's does.
  EXPECT_LT(b.fast.size(), 20u);
}

TEST(FastUnwind, TheSameStackTwiceAndAnotherInBetween) {
  // The second walk takes its rules from the thread's memo: still exact, and a
  // stack that differs below the same frames is followed, not reused.
  std::vector<Both> runs;
  volatile int rounds = 2;
  for (int i = 0; i < rounds; ++i) {  // one call site for both (not unrolled): the same stack
    runs.push_back(frameless(3));
    expect_same(with_alloca(100), "between");
  }
  const Both &a = runs[0], &c = runs[1];
  expect_same(a, "first");
  expect_same(c, "again");
  ASSERT_EQ(a.fast.size(), c.fast.size());
  for (size_t i = 1; i < a.fast.size(); ++i) EXPECT_EQ(a.fast[i], c.fast[i]);
}

// Two callers of one helper at the same stack depth: the walk starts at the
// same stack pointer both times, and only the helper's return address, five
// frames above the walk's start, tells the stacks apart. The replay must see it.
__attribute__((noinline)) Both helper() { return frameless(1); }
__attribute__((noinline)) Both via_a() { return helper(); }
__attribute__((noinline)) Both via_b() { return helper(); }
__attribute__((noinline)) Both one_of(bool a) {
  Both b = a ? via_a() : via_b();
  asm volatile("" ::: "memory");
  return b;
}

TEST(FastUnwind, ReplaysTheSameStackAndNothingElse) {
  init();
  std::vector<Both> a, b;
  const uint64_t before = cache_stats().replays;
  // a a b b a a b b ...: each stack once after itself (a replay), once after
  // the other. One call site in this loop for all of them.
  const bool order[] = {true, true, false, false, true, true, false, false};
  const uint64_t rounds = sizeof order / sizeof order[0] / 4;
  for (const bool via : order) (via ? a : b).push_back(one_of(via));
  const uint64_t replays = cache_stats().replays - before;
  for (const Both& x : a) expect_same(x, "via_a");
  for (const Both& x : b) expect_same(x, "via_b");
  // The walks replayed (else this tested nothing), and not the ones that
  // followed the other caller: those differ in a word the walk read.
  EXPECT_GE(replays, rounds * 2) << "no walk was replayed";
  ASSERT_EQ(a[0].fast.size(), b[0].fast.size());
  bool differ = false;
  for (size_t i = 1; i < a[0].fast.size(); ++i) differ = differ || a[0].fast[i] != b[0].fast[i];
  EXPECT_TRUE(differ) << "via_a and via_b gave the same stack";
  for (const Both& x : a) EXPECT_EQ(x.fast, a[0].fast);
  for (const Both& x : b) EXPECT_EQ(x.fast, b[0].fast);
}

__attribute__((noinline)) bool walk_here(uint64_t* frames, uint32_t max, uint64_t lo, uint64_t hi, uint32_t* n) {
  const bool ok = walk(frames, max, lo, hi, n);
  asm volatile("" ::: "memory");
  return ok;
}

TEST(FastUnwind, SkipsTheGivenRange) {
  init();
  uint64_t all[64], skipped[64];
  uint32_t n = 0, m = 0;
  ASSERT_TRUE(walk_here(all, 64, 0, 0, &n));
  ASSERT_GE(n, 2u);
  // Leave out the innermost frame (the return address into walk_here).
  ASSERT_TRUE(walk_here(skipped, 64, all[0], all[0] + 1, &m));
  EXPECT_EQ(m + 1, n);
  // (Frame 1 is the return address into this test from two call sites.)
  for (uint32_t i = 1; i < m; ++i) EXPECT_EQ(skipped[i], all[i + 1]) << i;
  // At most `max` of the app's frames.
  ASSERT_TRUE(walk_here(all, 2, 0, 0, &n));
  EXPECT_EQ(n, 2u);
}

// A hook as the shim's are: a function that hands its return address and its
// frame address (which gives it a frame pointer) to the walk, and, to
// compare, walks from its own frame too.
struct FromHook {
  uint64_t ra = 0;
  uint64_t from[64], own[64];
  uint32_t n_from = 0, n_own = 0;
  bool ok_from = false, ok_own = false;
};
__attribute__((noinline)) void hook_like(FromHook& h, const void* frame_override, bool compare = true) {
  void* const ra = __builtin_return_address(0);
  const void* frame = frame_override ? frame_override : __builtin_frame_address(0);
  h.ra = reinterpret_cast<uint64_t>(ra);
  h.ok_from = walk_from(h.ra, frame, h.from, 64, 0, 0, &h.n_from);
  if (compare) h.ok_own = walk_here(h.own, 64, 0, 0, &h.n_own);
  asm volatile("" ::: "memory");
}
__attribute__((noinline, optimize("omit-frame-pointer"))) void frameless_to_hook(FromHook& h, int depth,
                                                                                   const void* frame) {
  volatile char pad[24] = {static_cast<char>(depth)};
  if (depth > 0)
    frameless_to_hook(h, depth - 1, frame);
  else
    hook_like(h, frame);
  asm volatile("" ::"r"(pad) : "memory");
}
// Where the hook's return address is in a walk's frames (n: not there).
uint32_t index_of(const uint64_t* frames, uint32_t n, uint64_t ra) {
  uint32_t i = 0;
  while (i < n && frames[i] != ra) ++i;
  return i;
}

TEST(FastUnwind, FromAHooksFrameItStartsAtTheHooksCaller) {
  init();
  const uint64_t unframed = cache_stats().unframed;
  FromHook h;
  frameless_to_hook(h, 3, nullptr);
  ASSERT_TRUE(h.ok_from);
  ASSERT_TRUE(h.ok_own);
  EXPECT_EQ(cache_stats().unframed, unframed) << "the hook's frame was not taken";
  // The walk from the hook's frame starts at its return address; the own
  // walk reaches it after the frames inside hook_like, then both agree.
  ASSERT_GE(h.n_from, 5u);
  EXPECT_EQ(h.from[0], h.ra);
  const uint32_t k = index_of(h.own, h.n_own, h.ra);
  ASSERT_LT(k, h.n_own) << "the own walk never reached the hook's caller";
  ASSERT_EQ(h.n_from + k, h.n_own);
  for (uint32_t i = 0; i < h.n_from; ++i) EXPECT_EQ(h.from[i], h.own[i + k]) << "frame " << i;
  // At most `max` frames, the caller's return address among them.
  uint64_t two[2];
  uint32_t n = 0;
  struct TwoFrames {
    __attribute__((noinline)) static bool hook(uint64_t* f, uint32_t* n) {
      const bool ok = walk_from(reinterpret_cast<uint64_t>(__builtin_return_address(0)),
                                __builtin_frame_address(0), f, 2, 0, 0, n);
      asm volatile("" ::: "memory");
      return ok;
    }
  };
  ASSERT_TRUE(TwoFrames::hook(two, &n));
  EXPECT_EQ(n, 2u);
}

TEST(FastUnwind, FromAFrameThatIsNotOneItWalksFromItsOwn) {
  init();
  // A "frame" whose word above is not the return address (a buffer on the
  // stack), and a heap block: neither is followed. The walk then starts at
  // walk_from's own frame (or its caller's, when it tail-calls the walk) and
  // still reaches the hook's caller, with every frame after it right.
  alignas(16) uint64_t fake[4] = {0x1111, 0x2222, 0x3333, 0x4444};
  std::vector<uint64_t> heap(4, 0);
  for (const void* frame : {static_cast<const void*>(fake), static_cast<const void*>(heap.data())}) {
    const uint64_t unframed = cache_stats().unframed;
    FromHook h;
    frameless_to_hook(h, 2, frame);
    EXPECT_EQ(cache_stats().unframed, unframed + 1);
    ASSERT_TRUE(h.ok_from);
    ASSERT_TRUE(h.ok_own);
    EXPECT_NE(h.from[0], h.ra) << "started at the hook's caller from a frame that is not one";
    const uint32_t i = index_of(h.from, h.n_from, h.ra), k = index_of(h.own, h.n_own, h.ra);
    ASSERT_LT(i, h.n_from);
    ASSERT_LT(k, h.n_own);
    ASSERT_EQ(h.n_from - i, h.n_own - k);
    for (uint32_t j = 0; i + j < h.n_from; ++j) EXPECT_EQ(h.from[i + j], h.own[k + j]) << "frame " << j;
  }
}

// The same stack pointer, another caller: a walk from a hook's frame replays
// only when the return address it starts from is the same. (The two callers
// differ in a constant, so that the linker does not fold them into one.)
volatile int g_via = 0;
__attribute__((noinline)) void hook_via_a(FromHook& h) {
  g_via = 1;
  hook_like(h, nullptr, false);
  asm volatile("" ::: "memory");
}
__attribute__((noinline)) void hook_via_b(FromHook& h) {
  g_via = 2;
  hook_like(h, nullptr, false);
  asm volatile("" ::: "memory");
}

TEST(FastUnwind, FromAHooksFrameItReplaysTheSameCallerOnly) {
  init();
  const uint64_t before = cache_stats().replays;
  std::vector<std::vector<uint64_t>> a, b;
  const bool order[] = {true, true, false, false, true, true, false, false};
  for (const bool via : order) {
    FromHook h;
    if (via)
      hook_via_a(h);
    else
      hook_via_b(h);
    ASSERT_TRUE(h.ok_from);
    (via ? a : b).emplace_back(h.from, h.from + h.n_from);
  }
  EXPECT_GE(cache_stats().replays - before, 4u) << "no walk was replayed";
  for (const auto& x : a) EXPECT_EQ(x, a[0]);
  for (const auto& x : b) EXPECT_EQ(x, b[0]);
  ASSERT_FALSE(a[0].empty());
  EXPECT_NE(a[0][0], b[0][0]) << "the two callers' stacks start at the same return address";
}

TEST(FastUnwind, AColdCaptureNotesWhatItReadForTheNextOnesPrefetches) {
  // Per step, the rule's slot and then the return address's slot. The slots
  // of frames 2 and up are in frames still live (this test's and its
  // callers'): they still hold exactly the frames the walk returned.
  init();
  PrefetchTrail& trail = prefetch_trail();
  uint64_t tsc = 1'000'000'000;
  trail.begin(0x1234, tsc);
  ASSERT_TRUE(trail.noting());
  EXPECT_EQ(trail.size(PrefetchTrail::kNative), 0u);
  uint64_t frames[64];
  uint32_t n = 0;
  ASSERT_TRUE(walk_here(frames, 4, 0, 0, &n));
  ASSERT_EQ(n, 4u);
  ASSERT_EQ(trail.size(PrefetchTrail::kNative), 2 * n);
  for (uint32_t i = 2; i < n; ++i)
    EXPECT_EQ(*reinterpret_cast<const uint64_t*>(trail.at(PrefetchTrail::kNative, 2 * i + 1)), frames[i]) << i;
  // Bounded: a deep walk notes at most kPerPart addresses (the outermost
  // frame's step notes its rule only).
  tsc += 2 * PrefetchTrail::kColdCycles;
  trail.begin(0x1234, tsc);
  ASSERT_TRUE(trail.noting());
  EXPECT_EQ(trail.size(PrefetchTrail::kNative), 0u);
  ASSERT_TRUE(walk_here(frames, 64, 0, 0, &n));
  EXPECT_EQ(trail.size(PrefetchTrail::kNative), std::min<uint32_t>(2 * n + 1, PrefetchTrail::kPerPart));
  // A capture right after another (warm) notes nothing.
  tsc += PrefetchTrail::kColdCycles / 2;
  trail.begin(0x1234, tsc);
  EXPECT_FALSE(trail.noting());
  ASSERT_TRUE(walk_here(frames, 4, 0, 0, &n));
  EXPECT_EQ(trail.size(PrefetchTrail::kNative), 0u);
}

TEST(FastUnwind, AfterDlcloseTheRulesAreFoundAgain) {
  const CacheStats before = cache_stats();
  void* h = dlopen("libm.so.6", RTLD_NOW);
  ASSERT_NE(h, nullptr);
  dlclose(h);   // libm stays (the process links it, or not): either way the walk stays exact
  after_dlclose();
  expect_same(frameless(2), "after dlclose");
  EXPECT_GE(cache_stats().lookups, before.lookups);
}

Raw g_in_handler;
FromHook g_hook_in_handler;
void handler(int) {
  capture_raw(g_in_handler);
  hook_like(g_hook_in_handler, nullptr, false);
}

void expect_refused_or_same(const Both& b, const char* what) {
  if (!b.walked) return;  // refused: the caller takes libunwind's stack
  expect_same(b, what);
}

TEST(FastUnwind, InASignalHandlerRefusedOrRight) {
  struct sigaction sa {}, old{};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  g_in_handler = {};
  raise(SIGUSR1);
  expect_refused_or_same(to_both(g_in_handler), "signal handler");
  // The frame under the handler is the kernel's signal frame: the walk cannot
  // step through it and must say so.
  EXPECT_FALSE(g_in_handler.walked);

  // On an alternate stack: outside the thread's stack, refused at once.
  stack_t ss{}, old_ss{};
  std::vector<char> alt(1 << 16);
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  ASSERT_EQ(sigaltstack(&ss, &old_ss), 0);
  sa.sa_flags = SA_ONSTACK;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, nullptr), 0);
  g_in_handler = {};
  g_hook_in_handler = {};
  raise(SIGUSR1);
  EXPECT_FALSE(g_in_handler.walked);
  EXPECT_FALSE(g_hook_in_handler.ok_from);  // a hook's walk there: refused at once as well
  sigaltstack(&old_ss, nullptr);
  sigaction(SIGUSR1, &old, nullptr);
}

Raw g_in_fiber;
FromHook g_hook_in_fiber;
ucontext_t g_main_ctx, g_fiber_ctx;
void fiber_body() {
  capture_raw(g_in_fiber);
  hook_like(g_hook_in_fiber, nullptr, false);
}

TEST(FastUnwind, OnAFibersStackItDeclines) {
  // A stack of the program's own making (as boost.context's or a coroutine
  // library's): outside the thread's stack, so the walk never starts there.
  std::vector<char> stack(1 << 16);
  ASSERT_EQ(getcontext(&g_fiber_ctx), 0);
  g_fiber_ctx.uc_stack.ss_sp = stack.data();
  g_fiber_ctx.uc_stack.ss_size = stack.size();
  g_fiber_ctx.uc_link = &g_main_ctx;
  makecontext(&g_fiber_ctx, fiber_body, 0);
  g_in_fiber = {};
  const uint64_t before = cache_stats().declines[static_cast<unsigned>(Decline::ForeignStack)];
  ASSERT_EQ(swapcontext(&g_main_ctx, &g_fiber_ctx), 0);
  EXPECT_FALSE(g_in_fiber.walked);
  // Counted, with its reason, for the trace's note.
  const CacheStats after = cache_stats();
  // (Both walks there: capture_raw's and the hook's, below.)
  EXPECT_EQ(after.declines[static_cast<unsigned>(Decline::ForeignStack)], before + 2);
  EXPECT_NE(after.first_decline_pc, 0u);
  EXPECT_NE(after.first_decline_why, Decline::None);
  EXPECT_GT(g_in_fiber.got, 0);  // glibc's unwinder, the fallback, still gives a stack there
  // A hook called there declines too, though its frame is a good one: the
  // walk never leaves the thread's own stack.
  EXPECT_FALSE(g_hook_in_fiber.ok_from);
}

}  // namespace
}  // namespace cuxfer::shim::unwind
