#include <gtest/gtest.h>

#include "policy/policy.h"

namespace cuxfer::policy {
namespace {

Policy sample() {
  Policy p;
  p.generator = "cuxfer 0.1.0 policy";
  p.comment = "from run1";
  Entry a;
  a.site = {SiteKind::Call, "0123456789abcdef0123456789abcdef01234567", 0x1a2b, "/opt/app/train",
            "load_batch(int)", "load.cpp:42", "", "", 0};
  a.path = Path::Register;
  a.min_bytes = 1 << 20;
  a.estimated_gain_ns = 987654321;
  a.findings = {"rewrite_candidates"};
  a.reason = "a \"quoted\" reason";
  Entry b;
  b.site = {SiteKind::Allocation, "00ff", 0x40, "", "", "", "", "", 0};
  b.path = Path::ZeroCopy;
  b.comment = "SPECULATIVE: measure it first";
  Entry c;
  c.site = {SiteKind::Call, "00ff", 0x80, "", "", "", "", "", 0};
  c.path = Path::Exclude;
  p.entries = {a, b, c};
  return p;
}

void expect_equal(const Policy& x, const Policy& y) {
  EXPECT_EQ(x.generator, y.generator);
  EXPECT_EQ(x.comment, y.comment);
  ASSERT_EQ(x.entries.size(), y.entries.size());
  for (size_t i = 0; i < x.entries.size(); ++i) {
    const Entry &a = x.entries[i], &b = y.entries[i];
    EXPECT_TRUE(same_site(a.site, b.site)) << i;
    EXPECT_EQ(a.site.module, b.site.module);
    EXPECT_EQ(a.site.symbol, b.site.symbol);
    EXPECT_EQ(a.site.source, b.site.source);
    EXPECT_EQ(a.path, b.path);
    EXPECT_EQ(a.min_bytes, b.min_bytes);
    EXPECT_EQ(a.estimated_gain_ns, b.estimated_gain_ns);
    EXPECT_EQ(a.findings, b.findings);
    EXPECT_EQ(a.reason, b.reason);
    EXPECT_EQ(a.comment, b.comment);
  }
}

TEST(PolicyWrite, RoundTrip) {
  const Policy p = sample();
  const std::string text = write_policy(p);
  Policy back;
  std::string error;
  ASSERT_TRUE(parse_policy(text, back, error)) << error << "\n" << text;
  expect_equal(p, back);
  EXPECT_EQ(write_policy(back), text);  // stable bytes
}

TEST(PolicyWrite, StableLayout) {
  Policy p;
  Entry e;
  e.site = {SiteKind::Call, "abcd", 0x10, "/bin/app", "main", "", "", "", 0};
  e.path = Path::Stage;
  e.estimated_gain_ns = 5;
  p.entries = {e};
  EXPECT_EQ(write_policy(p), R"({
  "schema": "cuxfer.policy/1",
  "entries": [
    {
      "site": {
        "kind": "call",
        "build_id": "abcd",
        "offset": "0x10",
        "module": "/bin/app",
        "symbol": "main"
      },
      "path": "stage",
      "estimated_gain_ns": 5
    }
  ]
}
)");
}

TEST(PolicyWrite, EmptyPolicyRoundTrips) {
  Policy back;
  std::string error;
  ASSERT_TRUE(parse_policy(write_policy(Policy{}), back, error)) << error;
  EXPECT_TRUE(back.entries.empty());
}

TEST(PolicyWrite, NonUtf8SymbolDoesNotThrow) {
  Policy p;
  Entry e;
  e.site = {SiteKind::Call, "abcd", 0x10, "", std::string("bad\xff") + "name", "", "", "", 0};
  e.path = Path::Stage;
  p.entries = {e};
  std::string text;
  EXPECT_NO_THROW(text = write_policy(p));
  Policy back;
  std::string error;
  EXPECT_TRUE(parse_policy(text, back, error)) << error;
}

}  // namespace
}  // namespace cuxfer::policy
