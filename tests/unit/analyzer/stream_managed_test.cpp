// Managed allocations and unified-memory records in a streamed report
// (analyses/stream.h, ManagedFeed in managed.h): they stream, and the report
// equals the one made holding every event, byte for byte: records written
// among the events in the shim's later cycles, addresses reused, records in
// no allocation, prefetched and on-demand causes, several processes. An
// allocation written after a record it would have taken is said, and the job
// read whole.
#include <gtest/gtest.h>

#include <random>

#include "analyzer/analyses/managed.h"
#include "analyzer/cli/summary_inputs.h"
#include "tests/unit/analyzer/job_fixture.h"
#include "tests/unit/analyzer/managed_traces.h"
#include "tests/unit/analyzer/streamed_report.h"

namespace cuxfer::testing {
namespace {

using trace::Direction;
using trace::MemKind;
using trace::UmCause;
using trace::UmCounter;

constexpr uint64_t KiB = 1 << 10, MiB = 1 << 20;
constexpr uint64_t kBase = kManagedBase;

class StreamManaged : public JobTest {
 protected:
  std::string whole(const std::vector<std::string>& paths) {
    return render_json_and_text(analyses::analyze(load_paths(paths)));
  }
};

TEST_F(StreamManaged, SeveralProcessesEqualTheWholeRead) {
  SyntheticTrace unavailable(300);
  unavailable.process.trace_name = "unavailable";
  unavailable.notes.push_back("cupti: unified memory records unavailable: not supported here");
  managed_alloc(unavailable, kBase, 4 * MiB, unavailable.site(0x9000));
  unavailable.copy(Direction::HtoD, MemKind::Pageable, MiB, 100'000);
  // CUPTI on, its copies' records lost: the unified-memory records are its only ones.
  SyntheticTrace um_only = managed_training(600, 10, false, 0x600000);
  um_only.status.cupti = trace::CuptiState::Active;
  um_only.status.cupti_reason.clear();
  const std::vector<std::string> paths = {write(managed_training(100, 60, true, 0x400000), "a.trace"),
                                          write(managed_training(200, 45, false, 0x500000), "b.trace"),
                                          write(unavailable, "c.trace"), write(um_only, "d.trace")};
  const std::string w = whole(paths);
  const std::optional<analyses::Report> r = streamed_report(paths);
  ASSERT_TRUE(r);
  EXPECT_EQ(render_json_and_text(*r), w);
  // The report holds what the test is about.
  EXPECT_TRUE(r->managed.records_on);
  EXPECT_EQ(r->managed.unavailable.size(), 1u);
  EXPECT_EQ(r->managed.total.allocations, 1u + 60 + 1 + 45 + 1 + 1 + 10);
  EXPECT_GT(r->managed.total.prefetched_bytes, 0u);
  EXPECT_GT(r->managed.total.on_demand_bytes, 0u);
  EXPECT_GT(r->managed.total.on_demand_ns, 0u);
  bool unattributed = false;
  for (const auto& s : r->managed.sites) unattributed |= s.callsite == 0 && s.htod_bytes > 0;
  EXPECT_TRUE(unattributed);
  EXPECT_NE(w.find("managed_migrations"), std::string::npos);
  EXPECT_NE(w.find("Managed memory"), std::string::npos);
}

TEST_F(StreamManaged, ReusedAddressBeforeAndAfterItsRecordsEqualsTheWholeRead) {
  // The record of the first allocation is read before the second, at the
  // same address, is; a record of the second's time is read after it. And a
  // record that starts before the allocation it lies in was made (a clock
  // skew): the whole read gives it that allocation all the same.
  SyntheticTrace t(400);
  t.events_per_block = 2;
  t.notes.push_back("cupti: unified memory records on");
  const uint32_t first = t.site(0x401000), second = t.site(0x402000);
  const uint64_t t_first = managed_alloc(t, kBase, 4 * MiB, first).t_enter_ns;
  t.copy(Direction::HtoD, MemKind::Pageable, KiB, 1000);
  um(t, 2, um_record(UmCounter::HtoD, kBase + MiB, t_first + 10, 100'000, 2 * MiB));
  managed_free(t, kBase);
  t.copy(Direction::HtoD, MemKind::Pageable, KiB, 1000);
  const uint64_t t_second = managed_alloc(t, kBase, 8 * MiB, second).t_enter_ns;
  t.copy(Direction::HtoD, MemKind::Pageable, KiB, 1000);
  um(t, 6, um_record(UmCounter::HtoD, kBase + 6 * MiB, t_second + 10, 200'000, 2 * MiB));
  um(t, 6, um_record(UmCounter::HtoD, kBase + 2 * MiB, t_second + 500'000, 300'000, 2 * MiB));
  const uint64_t t_third = managed_alloc(t, kBase + 64 * MiB, 4 * MiB, first).t_enter_ns;
  t.copy(Direction::HtoD, MemKind::Pageable, KiB, 1000);
  um(t, 8, um_record(UmCounter::HtoD, kBase + 64 * MiB, t_third - 100, 100'000, 2 * MiB));
  const std::vector<std::string> paths = {write(t, "reuse.trace")};
  const std::string w = whole(paths);
  const std::optional<analyses::Report> r = streamed_report(paths);
  ASSERT_TRUE(r);
  EXPECT_EQ(render_json_and_text(*r), w);
  // The first site: its first allocation's record and the skewed one; the
  // second: both records of its time.
  ASSERT_EQ(r->managed.sites.size(), 2u);
  for (const auto& s : r->managed.sites) {
    EXPECT_TRUE(s.callsite == first || s.callsite == second) << s.callsite;
    EXPECT_EQ(s.htod_bytes, 4 * MiB) << s.callsite;
    EXPECT_EQ(s.htod_migrations, 2u) << s.callsite;
  }
}

TEST_F(StreamManaged, AllocationWrittenAfterARecordItTakesIsSaidAndReadWhole) {
  // The record lies in the allocation and starts after it, but is written
  // before it (a thread's events flushed late): read as it comes it would go
  // to no allocation.
  SyntheticTrace t(500);
  t.events_per_block = 2;
  t.notes.push_back("cupti: unified memory records on");
  t.copy(Direction::HtoD, MemKind::Pageable, KiB, 1000);
  t.copy(Direction::HtoD, MemKind::Pageable, KiB, 1000);
  const uint64_t at = managed_alloc(t, kBase, 4 * MiB, t.site(0x401000)).t_enter_ns;
  um(t, 2, um_record(UmCounter::HtoD, kBase, at + 10, 100'000, 2 * MiB));
  const std::vector<std::string> paths = {write(t, "late.trace")};

  trace::EventBlocks skip;
  skip.skip = true;
  skip.skip_gpu_records = true;
  std::vector<std::string> errors;
  auto sym = symbolize::make_symbolizer(false);
  const model::Job frame = model::build_job(model::read_traces(paths, errors, skip), *sym);
  ASSERT_FALSE(analyses::needs_events(frame));
  analyses::Thresholds th;
  uint64_t bytes = 0;
  std::string why;
  EXPECT_FALSE(analyses::stream_process(frame, 0, th, nullptr, bytes, &why));
  EXPECT_NE(why.find("late.trace (pid 500): a managed allocation (at 0x7e0000000000) is written after a "
                     "unified-memory record it would have taken"),
            std::string::npos)
      << why;
  // The whole read gives it its allocation.
  const analyses::Report whole_report = analyses::analyze(load_paths(paths));
  ASSERT_EQ(whole_report.managed.sites.size(), 1u);
  EXPECT_EQ(whole_report.managed.sites[0].htod_bytes, 2 * MiB);
}

TEST_F(StreamManaged, SummariesStreamAndEqualTheWholeRead) {
  const std::vector<std::string> paths = {write(managed_training(100, 30, true, 0x400000), "a.trace"),
                                          write(managed_training(200, 20, false, 0x500000), "b.trace")};
  cli::SymbolOptions symbols;
  symbols.enabled = false;
  for (const auto& p : paths) EXPECT_TRUE(cli::summarize_streamed(p, symbols)) << p;
  std::vector<std::string> errors;
  analyses::SummaryHeader header;
  header.symbols = "off";
  const std::string streamed =
      analyses::write_summary(header, cli::summarize_traces(paths, symbols, 2, errors));
  const std::string whole_read =
      analyses::write_summary(header, cli::summarize_traces(paths, symbols, 2, errors, /*stream=*/false));
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(streamed, whole_read);
}

// A union known by its length alone (a summary's): the length, and nothing added.
TEST(IntervalUnion, OfLengthKeepsTheLengthAndTakesNoMore) {
  analyses::IntervalUnion u = analyses::IntervalUnion::of_length(12'345);
  EXPECT_EQ(u.length(), 12'345u);
  EXPECT_FALSE(u.add(0, 10));
  EXPECT_FALSE(u.add(UINT64_MAX - 10, UINT64_MAX));
  EXPECT_TRUE(u.add(5, 5));  // empty: adds nothing, refused or not
  EXPECT_EQ(u.length(), 12'345u);
}

// IntervalUnion: the length of the union, whatever the order; past the kept
// intervals, one that starts before the settled ones end is refused.
TEST(IntervalUnion, LengthIsTheUnionsInAnyOrder) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    const int n = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      const uint64_t b = rng() % 1000, len = rng() % 50;
      spans.emplace_back(b, b + len - (len > 45 ? len : 0));  // some empty
    }
    std::vector<bool> covered(1100, false);
    for (auto [b, e] : spans)
      for (uint64_t x = b; x < e; ++x) covered[x] = true;
    const auto expected = static_cast<uint64_t>(std::count(covered.begin(), covered.end(), true));
    analyses::IntervalUnion u;
    for (auto [b, e] : spans) ASSERT_TRUE(u.add(b, e));
    EXPECT_EQ(u.length(), expected);
    // Kept few: in time order it never refuses, and settles exactly.
    std::sort(spans.begin(), spans.end());
    analyses::IntervalUnion few;
    for (auto [b, e] : spans) ASSERT_TRUE(few.add(b, e, 3));
    EXPECT_LE(few.kept(), 3u);
    EXPECT_EQ(few.length(), expected);
  }
  analyses::IntervalUnion u;
  ASSERT_TRUE(u.add(0, 10, 1));
  ASSERT_TRUE(u.add(20, 30, 1));  // [0, 10) settled
  EXPECT_TRUE(u.add(10, 15, 1));  // touches the settled span: its length is exact
  EXPECT_FALSE(u.add(5, 12, 1));
  EXPECT_EQ(u.length(), 25u);
}

// ManagedFeed: fed in any order, where it says it is exact its tally is the
// one fed every allocation first (the whole job's).
TEST(ManagedFeed, ExactWhereItSaysSoInAnyOrder) {
  std::mt19937_64 rng(11);
  int exact = 0, inexact = 0;
  for (int round = 0; round < 400; ++round) {
    std::vector<trace::Event> events;
    const int allocations = 1 + static_cast<int>(rng() % 8);
    for (int i = 0; i < allocations; ++i) {
      trace::Event e{};
      e.kind = static_cast<uint8_t>(trace::EventKind::ManagedAlloc);
      e.address = kBase + (rng() % 4) * MiB;
      e.bytes = (1 + rng() % 3) * MiB;
      e.t_enter_ns = 1000 * static_cast<uint64_t>(i) + 500;
      e.callsite_id = static_cast<uint32_t>(rng() % 3);
      events.push_back(e);
    }
    std::vector<model::Call> calls(events.size());
    for (size_t i = 0; i < events.size(); ++i) {
      calls[i].event = &events[i];
      calls[i].site = events[i].callsite_id == 0 ? model::kNoSite : events[i].callsite_id - 1;
    }
    std::vector<trace::GpuRecord> records;
    for (int i = 0; i < 12; ++i) {
      const auto counter = static_cast<UmCounter>(1 + rng() % 4);
      const auto cause = static_cast<UmCause>(rng() % 4);
      records.push_back(um_record(counter, kBase - MiB / 2 + rng() % (7 * MiB), rng() % 9000, rng() % 800,
                                  1 + rng() % MiB, cause));
    }
    analyses::ManagedTally all_first, as_read;
    analyses::ManagedFeed first(0);
    first.add_calls(calls);
    first.add_records(records);
    ASSERT_FALSE(first.inexact());
    first.take(all_first);
    // Interleaved: each allocation read after a random number of the records.
    analyses::ManagedFeed feed(0);
    size_t next_record = 0;
    for (const model::Call& c : calls) {
      const size_t upto = std::min(records.size(), next_record + rng() % 4);
      feed.add_records({records.data() + next_record, upto - next_record});
      next_record = upto;
      feed.add_calls({&c, 1});
    }
    feed.add_records({records.data() + next_record, records.size() - next_record});
    if (feed.inexact()) {
      ++inexact;
      continue;
    }
    ++exact;
    feed.take(as_read);
    ASSERT_EQ(as_read.size(), all_first.size());
    for (const auto& [key, s] : all_first) {
      const auto it = as_read.find(key);
      ASSERT_NE(it, as_read.end());
      const analyses::ManagedSiteTally& x = it->second;
      EXPECT_EQ(x.totals.allocations, s.totals.allocations);
      EXPECT_EQ(x.totals.allocated_bytes, s.totals.allocated_bytes);
      EXPECT_EQ(x.totals.htod_bytes, s.totals.htod_bytes);
      EXPECT_EQ(x.totals.dtoh_bytes, s.totals.dtoh_bytes);
      EXPECT_EQ(x.totals.htod_migrations, s.totals.htod_migrations);
      EXPECT_EQ(x.totals.dtoh_migrations, s.totals.dtoh_migrations);
      EXPECT_EQ(x.totals.on_demand_bytes, s.totals.on_demand_bytes);
      EXPECT_EQ(x.totals.prefetched_bytes, s.totals.prefetched_bytes);
      EXPECT_EQ(x.totals.migration_ns, s.totals.migration_ns);
      EXPECT_EQ(x.totals.gpu_fault_groups, s.totals.gpu_fault_groups);
      EXPECT_EQ(x.totals.cpu_faults, s.totals.cpu_faults);
      EXPECT_EQ(x.on_demand_htod, s.on_demand_htod);
      EXPECT_EQ(x.on_demand_dtoh, s.on_demand_dtoh);
      EXPECT_EQ(x.largest_allocation, s.largest_allocation);
      EXPECT_EQ(x.on_demand.length(), s.on_demand.length());
    }
  }
  // Both happen: the property is not vacuous.
  EXPECT_GT(exact, 20);
  EXPECT_GT(inexact, 50);
}

}  // namespace
}  // namespace cuxfer::testing
