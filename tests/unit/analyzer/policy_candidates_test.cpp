// `cuxfer policy`'s candidate derivation (analyses/policy_candidates.h) on
// synthetic traces with known answers: register for a reused buffer, stage for
// one-off large copies, zero_copy for a tiny storm's allocation and for a
// buffer uploaded whole again and again, and sites that cannot be named.
#include <gtest/gtest.h>

#include <algorithm>

#include "analyzer/analyses/policy_candidates.h"
#include "tests/unit/analyzer/job_fixture.h"

namespace cuxfer {
namespace {

using testing::JobTest;
using testing::SyntheticTrace;
using trace::Direction;
using trace::MemKind;

constexpr uint64_t MiB = 1 << 20;
constexpr uint64_t kBase = 0x400000;
constexpr const char* kBuildId = "0123456789abcdef0123456789abcdef01234567";

class PolicyCandidates : public JobTest {
 protected:
  SyntheticTrace app(const char* build_id = kBuildId) {
    SyntheticTrace t;
    t.modules.push_back({kBase, kBase, kBase + 0x100000, "/opt/app/train", build_id});
    return t;
  }
  analyses::PolicyCandidates derive(const SyntheticTrace& t,
                                    analyses::Speculation s = analyses::Speculation::Propose) {
    model::Job job = load(t);
    analyses::Thresholds th;
    analyses::Report r = analyses::analyze(job, th);
    return analyses::derive_policy(job, r, th, s);
  }
};

const policy::Entry* entry_at(const analyses::PolicyCandidates& c, uint64_t offset) {
  for (const auto& e : c.policy.entries)
    if (e.site.offset == offset) return &e;
  return nullptr;
}

// A copy plus the fingerprint event that carries its device pointer.
void copy_to(SyntheticTrace& t, Direction dir, uint64_t host, uint64_t device, uint64_t bytes, uint64_t cpu_ns,
             uint32_t site) {
  trace::Event& c = t.copy(dir, MemKind::Pageable, bytes, cpu_ns, false, site);
  c.address = host;
  const uint32_t corr = c.correlation_id;
  trace::Event& f =
      t.add(trace::EventKind::Fingerprint, "cuxfer:fingerprint", dir, MemKind::Unknown, MemKind::Unknown, bytes, 50);
  f.correlation_id = corr;
  f.address = 0x1234;  // the hash: irrelevant here
  f.stream = device;
}

void device_alloc(SyntheticTrace& t, uint64_t address, uint64_t bytes, uint32_t site) {
  trace::Event& e = t.add(trace::EventKind::DeviceAlloc, "cudaMalloc", Direction::Unknown, MemKind::Unknown,
                          MemKind::Device, bytes, 2000, 0, site);
  e.address = address;
}

TEST_F(PolicyCandidates, RegisterForAReusedBufferStageForOneOffCopies) {
  SyntheticTrace t = app();
  const uint32_t reused = t.site(kBase + 0x100), one_off = t.site(kBase + 0x200);
  for (int i = 0; i < 8; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 400'000, false, reused).address = 0x7f0000000000;
  for (int i = 0; i < 2; ++i)
    t.copy(Direction::HtoD, MemKind::Pageable, 64 * MiB, 9'000'000, false, one_off).address = 0x7e0000000000 + i * 128 * MiB;
  analyses::PolicyCandidates c = derive(t);
  const policy::Entry* r = entry_at(c, 0x100);
  const policy::Entry* s = entry_at(c, 0x200);
  ASSERT_TRUE(r && s);
  EXPECT_EQ(r->path, policy::Path::Register);
  EXPECT_EQ(s->path, policy::Path::Stage);
  EXPECT_EQ(r->site.build_id, kBuildId);
  EXPECT_EQ(r->site.kind, policy::SiteKind::Call);
  EXPECT_TRUE(std::count(r->findings.begin(), r->findings.end(), "rewrite_candidates"));
  EXPECT_GT(r->estimated_gain_ns.value_or(0), 0u);
  // Largest estimated gain first, and each call entry measures its own site.
  EXPECT_GE(c.policy.entries.front().estimated_gain_ns.value_or(0), c.policy.entries.back().estimated_gain_ns.value_or(0));
  ASSERT_EQ(c.copy_sites.size(), c.policy.entries.size());
  for (size_t i = 0; i < c.policy.entries.size(); ++i) {
    ASSERT_EQ(c.copy_sites[i].size(), 1u);
    EXPECT_EQ(c.copy_sites[i][0].offset, c.policy.entries[i].site.offset);
  }
}

TEST_F(PolicyCandidates, ZeroCopyForTheAllocationATinyStormWritesInto) {
  SyntheticTrace t = app();
  const uint32_t alloc_site = t.site(kBase + 0x300), storm = t.site(kBase + 0x400);
  const uint64_t device = 0x7d0000000000;
  device_alloc(t, device, 64 * 2000, alloc_site);
  for (int i = 0; i < 2000; ++i) copy_to(t, Direction::HtoD, 0x7f0000000000 + i * 64, device + i * 64, 64, 6'000, storm);
  analyses::PolicyCandidates c = derive(t);
  const policy::Entry* z = entry_at(c, 0x300);
  ASSERT_TRUE(z);
  EXPECT_EQ(z->path, policy::Path::ZeroCopy);
  EXPECT_EQ(z->site.kind, policy::SiteKind::Allocation);
  EXPECT_EQ(z->findings, std::vector<std::string>{"tiny_storm"});
  // Per copy: 6 us CPU-blocked minus 200 ns + 64 B at 5 GB/s (12.8 ns, rounded to 13).
  EXPECT_EQ(z->estimated_gain_ns.value_or(0), 2000u * (6'000u - 213u));
  const size_t i = static_cast<size_t>(z - c.policy.entries.data());
  ASSERT_EQ(c.copy_sites[i].size(), 1u);
  EXPECT_EQ(c.copy_sites[i][0].offset, 0x400u);  // tune measures it by the storm's call site
  ASSERT_EQ(c.speculative.size(), c.policy.entries.size());
  EXPECT_FALSE(c.speculative[i]);  // the report's tiny_storm supports it
}

TEST_F(PolicyCandidates, SpeculativeZeroCopyForABufferUploadedWholeAgainAndAgain) {
  SyntheticTrace t = app();
  const uint32_t alloc_site = t.site(kBase + 0x500), upload = t.site(kBase + 0x600);
  const uint64_t device = 0x7c0000000000;
  device_alloc(t, device, 4 * MiB, alloc_site);
  for (int i = 0; i < 3; ++i) copy_to(t, Direction::HtoD, 0x7f0000000000, device, 4 * MiB, 700'000, upload);
  analyses::PolicyCandidates c = derive(t);
  const policy::Entry* z = entry_at(c, 0x500);
  ASSERT_TRUE(z);
  EXPECT_EQ(z->path, policy::Path::ZeroCopy);
  EXPECT_EQ(z->findings, std::vector<std::string>{"whole_uploads"});
  EXPECT_NE(z->reason.find("speculative"), std::string::npos);
  EXPECT_EQ(z->estimated_gain_ns.value_or(0), 3u * 700'000u);
  ASSERT_EQ(c.speculative.size(), c.policy.entries.size());
  EXPECT_TRUE(c.speculative[static_cast<size_t>(z - c.policy.entries.data())]);
  EXPECT_TRUE(c.held_back.empty());
  // Uploaded once, or only part of the buffer: nothing recurring to remove.
  SyntheticTrace once = app();
  const uint32_t a2 = once.site(kBase + 0x500), u2 = once.site(kBase + 0x600);
  device_alloc(once, device, 4 * MiB, a2);
  copy_to(once, Direction::HtoD, 0x7f0000000000, device, 4 * MiB, 700'000, u2);
  for (int i = 0; i < 3; ++i) copy_to(once, Direction::HtoD, 0x7f0000000000, device, 2 * MiB, 350'000, u2);
  EXPECT_FALSE(entry_at(derive(once), 0x500));
}

// What the report does not list, the policy does not propose unless asked:
// held back, the speculative candidate is a line, and no entry.
TEST_F(PolicyCandidates, SpeculativeCandidatesAreHeldBackUnlessProposed) {
  SyntheticTrace t = app();
  const uint32_t alloc_site = t.site(kBase + 0x500), upload = t.site(kBase + 0x600);
  const uint64_t device = 0x7c0000000000;
  device_alloc(t, device, 4 * MiB, alloc_site);
  for (int i = 0; i < 3; ++i) copy_to(t, Direction::HtoD, 0x7f0000000000, device, 4 * MiB, 700'000, upload);
  analyses::PolicyCandidates held = derive(t, analyses::Speculation::HoldBack);
  EXPECT_FALSE(entry_at(held, 0x500));
  for (const auto& e : held.policy.entries)
    for (const auto& f : e.findings) EXPECT_NE(f, analyses::kWholeUploads);
  ASSERT_EQ(held.held_back.size(), 1u);
  EXPECT_NE(held.held_back[0].find("zero_copy: all 4.00 MiB of this allocation uploaded 3 times"),
            std::string::npos)
      << held.held_back[0];
  EXPECT_EQ(held.speculative, std::vector<bool>(held.policy.entries.size(), false));
}

TEST_F(PolicyCandidates, SitesWithoutABuildIdAreSkippedWithAReason) {
  SyntheticTrace t = app("");
  const uint32_t site = t.site(kBase + 0x100);
  for (int i = 0; i < 8; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 400'000, false, site);
  analyses::PolicyCandidates c = derive(t);
  EXPECT_TRUE(c.policy.entries.empty());
  ASSERT_FALSE(c.skipped.empty());
  EXPECT_NE(c.skipped[0].find("has no build id"), std::string::npos) << c.skipped[0];
}

}  // namespace
}  // namespace cuxfer
