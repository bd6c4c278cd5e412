// CallSiteTable: stack deduplication, depth cap, full table, concurrent
// interning, emission of new stacks to the writer; capture_stack's fallback.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "record/callsite_table.h"

namespace cuxfer::shim {
namespace {

// The shim's table lives as long as the process and has no destructor (its
// entries are one calloc). Tests keep every table they make reachable from
// here so that leak checkers do not report them.
CallSiteTable& fresh_table() {
  static std::vector<CallSiteTable*>* all = new std::vector<CallSiteTable*>;
  all->push_back(new CallSiteTable);
  return *all->back();
}

using Stack = std::vector<uint64_t>;

uint32_t intern(CallSiteTable& t, const Stack& s) {
  return t.intern(s.data(), static_cast<uint32_t>(s.size()));
}

// A distinct plausible stack per n (return addresses in a text segment).
Stack stack_for(uint32_t n, uint32_t depth = 4) {
  Stack s;
  for (uint32_t i = 0; i < depth; ++i) s.push_back(0x400000 + n * 0x40 + i * 0x100000);
  return s;
}

std::map<uint32_t, Stack> collect(CallSiteTable& t) {
  std::vector<trace::CallSite> out;
  t.collect_new(out);
  std::map<uint32_t, Stack> m;
  for (auto& cs : out) {
    EXPECT_EQ(m.count(cs.id), 0u) << "id " << cs.id << " emitted twice";
    m[cs.id] = cs.frames;
  }
  return m;
}

TEST(CallSiteTable, SameStackSameId) {
  auto& t = fresh_table();
  Stack a{0x401000, 0x402000, 0x403000};
  uint32_t id = intern(t, a);
  EXPECT_GE(id, 1u);
  EXPECT_EQ(intern(t, a), id);
  Stack copy = a;  // equal contents at another address
  EXPECT_EQ(intern(t, copy), id);
  EXPECT_EQ(t.dropped(), 0u);
}

TEST(CallSiteTable, DifferentStacksDifferentIds) {
  auto& t = fresh_table();
  std::vector<Stack> stacks = {
      {0x401000, 0x402000, 0x403000},
      {0x401000, 0x402000, 0x403001},     // differs in the last frame
      {0x401001, 0x402000, 0x403000},     // differs in the first frame
      {0x401000, 0x402000},               // a prefix: shorter depth
      {0x401000, 0x402000, 0x403000, 0},  // a suffix of zero: longer depth
      {0x403000, 0x402000, 0x401000},     // same frames, other order
      {0x401000},
  };
  std::set<uint32_t> ids;
  for (const auto& s : stacks) {
    uint32_t id = intern(t, s);
    EXPECT_GE(id, 1u);
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), stacks.size());
  // Stable on a second pass.
  std::vector<uint32_t> again;
  for (const auto& s : stacks) again.push_back(intern(t, s));
  EXPECT_EQ(std::set<uint32_t>(again.begin(), again.end()), ids);
  for (size_t i = 0; i < stacks.size(); ++i) EXPECT_EQ(intern(t, stacks[i]), again[i]);
}

TEST(CallSiteTable, EmptyStackHasNoId) {
  auto& t = fresh_table();
  uint64_t f = 0x401000;
  EXPECT_EQ(t.intern(&f, 0), 0u);
  EXPECT_EQ(t.dropped(), 0u);  // not a drop: nothing to record
  EXPECT_TRUE(collect(t).empty());
}

TEST(CallSiteTable, DepthIsCapped) {
  auto& t = fresh_table();
  constexpr uint32_t kDeep = CallSiteTable::kMaxDepth + 8;
  Stack deep1 = stack_for(1, kDeep), deep2 = stack_for(1, kDeep);
  deep2[CallSiteTable::kMaxDepth + 3] = 0xdead;  // differs only beyond kMaxDepth
  uint32_t id = intern(t, deep1);
  EXPECT_GE(id, 1u);
  EXPECT_EQ(intern(t, deep2), id);
  Stack capped(deep1.begin(), deep1.begin() + CallSiteTable::kMaxDepth);
  EXPECT_EQ(intern(t, capped), id);  // the same as its first kMaxDepth frames
  auto sites = collect(t);
  ASSERT_EQ(sites.size(), 1u);
  EXPECT_EQ(sites[id].size(), CallSiteTable::kMaxDepth);
  EXPECT_EQ(sites[id], capped);
}

TEST(CallSiteTable, ManyStacksUniqueAndStable) {
  auto& t = fresh_table();
  constexpr uint32_t kStacks = 4000;  // about half the table: probing copes with collisions
  std::vector<uint32_t> ids(kStacks);
  for (uint32_t i = 0; i < kStacks; ++i) ids[i] = intern(t, stack_for(i, 1 + i % 8));
  std::set<uint32_t> unique(ids.begin(), ids.end());
  EXPECT_EQ(unique.size(), kStacks);
  EXPECT_EQ(unique.count(0), 0u);
  EXPECT_LE(*unique.rbegin(), CallSiteTable::kCapacity);
  for (uint32_t i = 0; i < kStacks; ++i) ASSERT_EQ(intern(t, stack_for(i, 1 + i % 8)), ids[i]);
  EXPECT_EQ(t.dropped(), 0u);
}

TEST(CallSiteTable, FullTableReturnsZeroAndCountsDrops) {
  auto& t = fresh_table();
  constexpr uint32_t kStacks = CallSiteTable::kCapacity + 500;
  std::vector<uint32_t> ids(kStacks);
  uint64_t zeros = 0;
  for (uint32_t i = 0; i < kStacks; ++i) {
    ids[i] = intern(t, stack_for(i, 2));
    zeros += ids[i] == 0;
  }
  EXPECT_GE(zeros, 500u);  // at most kCapacity stacks fit
  EXPECT_EQ(t.dropped(), zeros);
  std::set<uint32_t> nonzero;
  for (uint32_t id : ids)
    if (id) nonzero.insert(id);
  EXPECT_EQ(nonzero.size(), kStacks - zeros);  // no two stacks share an id
  // Stacks that got an id keep it.
  for (uint32_t i = 0; i < kStacks; i += 97) {
    if (ids[i]) {
      EXPECT_EQ(intern(t, stack_for(i, 2)), ids[i]);
    }
  }
  EXPECT_EQ(collect(t).size(), nonzero.size());
}

TEST(CallSiteTable, CollectNewEmitsEachOnceAndMarkAllUnwrittenReEmits) {
  auto& t = fresh_table();
  Stack a = stack_for(1), b = stack_for(2, 3), c = stack_for(3, 1);
  uint32_t ia = intern(t, a), ib = intern(t, b);
  auto first = collect(t);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[ia], a);
  EXPECT_EQ(first[ib], b);

  EXPECT_TRUE(collect(t).empty());  // already written
  intern(t, a);                     // seen again: still nothing new
  EXPECT_TRUE(collect(t).empty());

  uint32_t ic = intern(t, c);
  auto second = collect(t);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[ic], c);

  t.mark_all_unwritten();  // a fork child's new trace needs them all
  auto all = collect(t);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[ia], a);
  EXPECT_EQ(all[ib], b);
  EXPECT_EQ(all[ic], c);
  EXPECT_TRUE(collect(t).empty());
}

// Threads intern overlapping sets of stacks in different orders: every
// thread must get the same id for the same stack, distinct stacks distinct
// ids, and the writer thread (collecting concurrently) emits each id once
// with its frames.
TEST(CallSiteTable, ConcurrentInterningIsConsistent) {
  auto& t = fresh_table();
  constexpr int kThreads = 6;
  constexpr uint32_t kStacks = 600;
  std::vector<std::vector<uint32_t>> ids(kThreads, std::vector<uint32_t>(kStacks));
  std::atomic<int> running{kThreads};
  std::vector<std::thread> ts;
  for (int th = 0; th < kThreads; ++th) {
    ts.emplace_back([&, th] {
      for (int rep = 0; rep < 3; ++rep)
        for (uint32_t k = 0; k < kStacks; ++k) {
          uint32_t i = th % 2 ? kStacks - 1 - k : (k * 7 + th) % kStacks;  // 7 is coprime to 600
          uint32_t id = intern(t, stack_for(i, 1 + i % 5));
          if (rep == 0)
            ids[th][i] = id;
          else if (ids[th][i] != id)
            ids[th][i] = 0xffffffff;  // unstable
        }
      running.fetch_sub(1);
    });
  }
  // The writer thread collects while the app threads intern.
  std::map<uint32_t, Stack> emitted;
  auto merge = [&] {
    std::vector<trace::CallSite> out;
    t.collect_new(out);
    for (auto& cs : out) {
      EXPECT_EQ(emitted.count(cs.id), 0u) << "id " << cs.id << " emitted twice";
      emitted[cs.id] = cs.frames;
    }
  };
  while (running.load() > 0) {
    merge();
    std::this_thread::yield();
  }
  for (auto& th : ts) th.join();
  merge();

  std::set<uint32_t> unique;
  for (uint32_t i = 0; i < kStacks; ++i) {
    uint32_t id = ids[0][i];
    ASSERT_GE(id, 1u);
    ASSERT_NE(id, 0xffffffffu);
    for (int th = 1; th < kThreads; ++th) ASSERT_EQ(ids[th][i], id) << "stack " << i << " thread " << th;
    unique.insert(id);
    ASSERT_EQ(emitted.count(id), 1u);
    EXPECT_EQ(emitted[id], stack_for(i, 1 + i % 5));
  }
  EXPECT_EQ(unique.size(), kStacks);
  EXPECT_EQ(emitted.size(), kStacks);
  EXPECT_EQ(t.dropped(), 0u);
}

TEST(CaptureStack, FallbackWhenDepthIsZero) {
  uint64_t frames[CallSiteTable::kMaxDepth] = {};
  int marker = 0;
  EXPECT_EQ(capture_stack(frames, 0, &marker), 1u);
  EXPECT_EQ(frames[0], reinterpret_cast<uint64_t>(&marker));
  EXPECT_EQ(capture_stack(frames, 0, nullptr), 0u);
}

TEST(CaptureStack, RespectsMaxDepth) {
  uint64_t frames[CallSiteTable::kMaxDepth] = {};
  // Under GoogleTest there are always more than 3 frames above this one.
  EXPECT_EQ(capture_stack(frames, 3, nullptr), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_NE(frames[i], 0u);
  EXPECT_LE(capture_stack(frames, CallSiteTable::kMaxDepth, nullptr), CallSiteTable::kMaxDepth);
}

__attribute__((noinline)) int some_function_of_this_test(int x) { return x + 1; }

TEST(DeclineSummary, SaysTheCommonestReasonsAndWhereTheFirstStopped) {
  unwind::CacheStats c;
  EXPECT_EQ(decline_summary(c), "");  // never declined: nothing to say
  using unwind::Decline;
  c.declines[static_cast<unsigned>(Decline::CfaExpression)] = 3050;
  c.declines[static_cast<unsigned>(Decline::OffStack)] = 2;
  c.declines[static_cast<unsigned>(Decline::NoFde)] = 7;
  c.declines[static_cast<unsigned>(Decline::TooDeep)] = 1;  // the fourth: left out
  c.first_decline_pc = reinterpret_cast<uint64_t>(&some_function_of_this_test) + 4;
  c.first_decline_why = Decline::CfaExpression;
  const std::string s = decline_summary(c);
  EXPECT_EQ(s.rfind(" (3050 at a CFA expression, 7 at code without an .eh_frame entry, 2 at a frame outside the "
                    "thread's stack; the first at ", 0), 0u) << s;
  EXPECT_EQ(s.find("too many frames"), std::string::npos) << s;
  // The object that holds the code, the offset and (when exported) the function.
  EXPECT_NE(s.find("+0x"), std::string::npos) << s;
  EXPECT_NE(s.find(": a CFA expression)"), std::string::npos) << s;
  // Code in no object: the address alone.
  c.first_decline_pc = 0x10;
  EXPECT_NE(decline_summary(c).find("the first at 0x10: a CFA expression)"), std::string::npos);
}

}  // namespace
}  // namespace cuxfer::shim
