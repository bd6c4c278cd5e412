#include <gtest/gtest.h>

#include "policy/site_matcher.h"

namespace cuxfer::policy {
namespace {

constexpr const char* kApp = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
constexpr const char* kLib = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

Entry make(SiteKind kind, const char* build_id, uint64_t offset, Path path, uint64_t min_bytes = 0) {
  Entry e;
  e.site.kind = kind;
  e.site.build_id = build_id;
  e.site.offset = offset;
  e.path = path;
  e.min_bytes = min_bytes;
  return e;
}

Policy sample() {
  Policy p;
  p.entries = {make(SiteKind::Call, kApp, 0x1000, Path::Register),       // 0
               make(SiteKind::Call, kLib, 0x2000, Path::Stage, 4096),    // 1
               make(SiteKind::Allocation, kApp, 0x3000, Path::ZeroCopy),  // 2
               make(SiteKind::Call, kApp, 0x4000, Path::Exclude)};       // 3
  return p;
}

TEST(SiteMatcher, MatchesAtAnyLoadBase) {
  const Policy p = sample();
  for (uint64_t base : {0x555555554000ull, 0x7f0012340000ull}) {  // two runs: ASLR
    SiteMatcher m;
    m.bind(p, {{"/opt/app", base, kApp}, {"/lib/libfoo.so", base + 0x100000000ull, kLib}});
    EXPECT_EQ(m.bound(), 4u);
    const uint64_t frames[] = {base + 0x1000};
    Decision d = m.decide(SiteKind::Call, frames, 1, 1 << 20);
    ASSERT_TRUE(d.matched);
    EXPECT_EQ(d.path, Path::Register);
    EXPECT_EQ(d.entry, 0u);
    EXPECT_EQ(d.frame, 0u);
  }
}

TEST(SiteMatcher, OtherBuildIdDoesNotMatch) {
  const Policy p = sample();
  SiteMatcher m;
  const uint64_t base = 0x555555554000ull;
  // The same path and base, rebuilt: another build id.
  m.bind(p, {{"/opt/app", base, "cccccccccccccccccccccccccccccccccccccccc"}});
  EXPECT_EQ(m.bound(), 0u);
  EXPECT_EQ(m.unbound_entries(), 4u);
  const uint64_t frames[] = {base + 0x1000, base + 0x4000};
  EXPECT_FALSE(m.decide(SiteKind::Call, frames, 2, 1 << 20).matched);
}

TEST(SiteMatcher, OnlyTheLoadedModulesEntriesBind) {
  const Policy p = sample();
  SiteMatcher m;
  m.bind(p, {{"/opt/app", 0x400000, kApp}});  // libfoo not loaded (yet)
  EXPECT_EQ(m.bound(), 3u);
  EXPECT_EQ(m.unbound_entries(), 1u);
}

TEST(SiteMatcher, BuildIdCaseDoesNotMatter) {
  Policy p;
  p.entries = {make(SiteKind::Call, "abcdef", 0x10, Path::Stage)};
  SiteMatcher m;
  m.bind(p, {{"/x", 0x1000, "ABCDEF"}});
  const uint64_t frames[] = {0x1010};
  EXPECT_TRUE(m.decide(SiteKind::Call, frames, 1, 1).matched);
}

TEST(SiteMatcher, FirstMatchingFrameWins) {
  const Policy p = sample();
  SiteMatcher m;
  const uint64_t app = 0x400000, lib = 0x7f0000000000;
  m.bind(p, {{"/opt/app", app, kApp}, {"/lib/libfoo.so", lib, kLib}});
  // innermost: an unknown frame, then libfoo's staged site, then the app's excluded one.
  const uint64_t frames[] = {0x1234, lib + 0x2000, app + 0x4000};
  Decision d = m.decide(SiteKind::Call, frames, 3, 1 << 20);
  ASSERT_TRUE(d.matched);
  EXPECT_EQ(d.path, Path::Stage);
  EXPECT_EQ(d.frame, 1u);
  // Below the staged entry's min_bytes it does not apply: the next frame's does.
  d = m.decide(SiteKind::Call, frames, 3, 100);
  ASSERT_TRUE(d.matched);
  EXPECT_EQ(d.path, Path::Exclude);
  EXPECT_EQ(d.frame, 2u);
  // No frame matches.
  const uint64_t none[] = {app + 0x1001, lib};
  EXPECT_FALSE(m.decide(SiteKind::Call, none, 2, 1 << 20).matched);
  EXPECT_FALSE(m.decide(SiteKind::Call, nullptr, 0, 1).matched);
}

TEST(SiteMatcher, KindMustMatch) {
  const Policy p = sample();
  SiteMatcher m;
  m.bind(p, {{"/opt/app", 0x400000, kApp}});
  const uint64_t alloc[] = {0x400000 + 0x3000};
  EXPECT_FALSE(m.decide(SiteKind::Call, alloc, 1, 64).matched);
  Decision d = m.decide(SiteKind::Allocation, alloc, 1, 64);
  ASSERT_TRUE(d.matched);
  EXPECT_EQ(d.path, Path::ZeroCopy);
  EXPECT_EQ(d.entry, 2u);
}

TEST(SiteMatcher, SameBuildIdLoadedTwiceBindsBoth) {
  const Policy p = sample();
  SiteMatcher m;
  m.bind(p, {{"/a/libfoo.so", 0x10000000, kLib}, {"/b/libfoo.so", 0x20000000, kLib}});
  EXPECT_EQ(m.bound(), 2u);
  const uint64_t a[] = {0x10002000}, b[] = {0x20002000};
  EXPECT_TRUE(m.decide(SiteKind::Call, a, 1, 1 << 20).matched);
  EXPECT_TRUE(m.decide(SiteKind::Call, b, 1, 1 << 20).matched);
}

TEST(SiteMatcher, ModuleWithoutBuildIdNeverMatches) {
  const Policy p = sample();
  SiteMatcher m;
  m.bind(p, {{"/opt/app", 0x400000, ""}});
  EXPECT_EQ(m.bound(), 0u);
}

}  // namespace
}  // namespace cuxfer::policy
