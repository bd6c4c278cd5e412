// Managed memory (CUPTI unified-memory records): per allocation site totals
// and the managed_migrations finding, on synthetic traces with known answers.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "analyzer/analyses/report.h"
#include "analyzer/render/text_renderer.h"
#include "tests/unit/analyzer/job_fixture.h"
#include "tests/unit/analyzer/managed_traces.h"

namespace cuxfer {
namespace {

using testing::find_finding;
using testing::JobTest;
using testing::SyntheticTrace;
using trace::Direction;
using trace::MemKind;
using trace::UmCause;
using trace::UmCounter;

constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t kBase = 0x7e0000000000ull;

class Managed : public JobTest {};

using testing::managed_alloc;

void um(SyntheticTrace& t, UmCounter counter, uint64_t address, uint64_t start, uint64_t ns, uint64_t value,
        UmCause cause = UmCause::Coherence) {
  t.gpu_records.push_back(testing::um_record(counter, address, start, ns, value, cause));
}

TEST_F(Managed, MigrationsAttributedToTheirAllocationSite) {
  SyntheticTrace t;
  t.notes.push_back("cupti: unified memory records on");
  const uint32_t faulty = t.site(0x401000), prefetched = t.site(0x402000);
  managed_alloc(t, kBase, 64 * MiB, faulty);
  managed_alloc(t, kBase + 64 * MiB, 64 * MiB, prefetched);
  const uint64_t t0 = t.clock_ns + 1'000'000;
  // Site 1: a GPU fault group served while 4 x 2 MiB migrate on demand, then the CPU reads one page back.
  um(t, UmCounter::GpuPageFault, kBase + 4096, t0, 1'000'000, 3);
  for (int i = 0; i < 4; ++i)
    um(t, UmCounter::HtoD, kBase + i * 2 * MiB, t0 + 100'000 + i * 200'000, 150'000, 2 * MiB);
  um(t, UmCounter::CpuPageFault, kBase + 8192, t0 + 2'000'000, 0, 1);
  um(t, UmCounter::DtoH, kBase, t0 + 2'000'000, 500'000, 2 * MiB);
  // Site 2: prefetched by the app: counted, not a finding.
  um(t, UmCounter::HtoD, kBase + 64 * MiB, t0 + 3'000'000, 1'400'000, 64 * MiB, UmCause::User);
  // An address in no allocation: unattributed.
  um(t, UmCounter::HtoD, 0x1000, t0 + 5'000'000, 10'000, 4096);

  analyses::Report r = analyses::analyze(load(t));
  const auto& m = r.managed;
  EXPECT_TRUE(m.records_on);
  EXPECT_EQ(m.total.allocations, 2u);
  EXPECT_EQ(m.total.htod_bytes, 8 * MiB + 64 * MiB + 4096);
  EXPECT_EQ(m.total.dtoh_bytes, 2 * MiB);
  EXPECT_EQ(m.total.prefetched_bytes, 64 * MiB);
  EXPECT_EQ(m.total.cpu_faults, 1u);
  EXPECT_EQ(m.total.gpu_fault_groups, 3u);
  ASSERT_EQ(m.sites.size(), 3u);
  const analyses::ManagedTotals& s = m.sites.front();  // most on-demand time first
  EXPECT_EQ(s.callsite, faulty);
  EXPECT_EQ(s.on_demand_bytes, 10 * MiB);
  EXPECT_EQ(s.htod_migrations, 4u);
  EXPECT_EQ(s.dtoh_migrations, 1u);
  // The fault's 1 ms covers the four H2D migrations; the D2H adds 0.5 ms.
  EXPECT_EQ(s.on_demand_ns, 1'500'000u);
  EXPECT_EQ(s.migration_ns, 4 * 150'000u + 500'000u);
  // Named as the call-site table names sites, though it is no copy site (issue 14: "#5" only).
  EXPECT_FALSE(s.frame.short_display().empty());
  const std::string text = render::render_text(r, {200, 10});
  // Its number is the text's (the sites numbered by rank, docs/report.md),
  // and the finding names it by the same one.
  const size_t at = text.find("allocated at #");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string number = text.substr(at + 13, text.find(' ', at + 13) - (at + 13));
  EXPECT_NE(text.find(fmt::format("allocated at {} {}", number, s.frame.short_display())), std::string::npos)
      << text;
  EXPECT_NE(text.find(fmt::format("at {} {}", number, s.frame.short_display()), at + 1), std::string::npos)
      << text;

  const analyses::Finding* f = find_finding(r, "managed_migrations");
  ASSERT_TRUE(f);
  ASSERT_EQ(f->sites.size(), 1u);  // the prefetched site and the unattributed 4 KiB are not in it
  EXPECT_EQ(f->sites[0].callsite, faulty);
  EXPECT_EQ(f->bytes, 10 * MiB);
  EXPECT_EQ(f->time_ns, 1'500'000u);
  // Nominal 50 GB/s: 10 MiB in 209,715 ns (8 MiB + 2 MiB, rounded down once).
  EXPECT_EQ(f->estimated_recoverable_ns.value_or(0), 1'500'000u - 209'715u);
}

TEST_F(Managed, ReusedAddressGoesToTheLatestAllocation) {
  SyntheticTrace t;
  t.notes.push_back("cupti: unified memory records on");
  const uint32_t first = t.site(0x401000), second = t.site(0x402000);
  managed_alloc(t, kBase, 4 * MiB, first);
  t.add(trace::EventKind::DeviceFree, "cudaFree", Direction::Unknown, MemKind::Unknown, MemKind::Managed, 0, 1000)
      .address = kBase;
  managed_alloc(t, kBase, 4 * MiB, second);
  um(t, UmCounter::HtoD, kBase, t.clock_ns + 10, 100'000, 4 * MiB);
  analyses::Report r = analyses::analyze(load(t));
  const analyses::Finding* f = find_finding(r, "managed_migrations");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->callsites, std::vector<uint32_t>{second});
}

TEST_F(Managed, DriverSpeculativePrefetchIsOnDemand) {
  // The driver migrates around a faulting page on its own (cause Prefetch):
  // the app asked for none of it, so it counts as on demand, not prefetched.
  SyntheticTrace t;
  t.notes.push_back("cupti: unified memory records on");
  managed_alloc(t, kBase, 64 * MiB, t.site(0x401000));
  const uint64_t t0 = t.clock_ns + 1000;
  um(t, UmCounter::HtoD, kBase, t0, 100'000, 2 * MiB, UmCause::Prefetch);
  um(t, UmCounter::HtoD, kBase + 2 * MiB, t0 + 200'000, 100'000, 2 * MiB, UmCause::User);
  analyses::Report r = analyses::analyze(load(t));
  EXPECT_EQ(r.managed.total.on_demand_bytes, 2 * MiB);
  EXPECT_EQ(r.managed.total.prefetched_bytes, 2 * MiB);
  EXPECT_EQ(r.managed.total.on_demand_ns, 100'000u);
}

TEST_F(Managed, SaysWhyWhenNotRecorded) {
  SyntheticTrace t;
  t.notes.push_back("cupti: unified memory records unavailable: not supported here");
  managed_alloc(t, kBase, 4 * MiB, t.site(0x401000));
  analyses::Report r = analyses::analyze(load(t));
  EXPECT_FALSE(r.managed.records_on);
  ASSERT_EQ(r.managed.unavailable.size(), 1u);
  EXPECT_NE(r.managed.unavailable[0].find("not supported here"), std::string::npos);
  EXPECT_FALSE(find_finding(r, "managed_migrations"));
}

TEST_F(Managed, NothingWithoutManagedMemory) {
  SyntheticTrace t;
  t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 200'000);
  analyses::Report r = analyses::analyze(load(t));
  EXPECT_FALSE(r.managed.records_on);
  EXPECT_TRUE(r.managed.sites.empty());
  EXPECT_FALSE(find_finding(r, "managed_migrations"));
}

}  // namespace
}  // namespace cuxfer
