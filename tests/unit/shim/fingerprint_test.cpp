// Sampled content fingerprints: deterministic, sensitive to sampled bytes and
// length, and honest about what they cannot see.
#include "record/fingerprint.h"

#include <gtest/gtest.h>

#include <vector>

namespace cuxfer::shim {
namespace {

TEST(Fingerprint, SameBytesSameFingerprint) {
  std::vector<unsigned char> a(1 << 20), b(1 << 20);
  for (size_t i = 0; i < a.size(); ++i) a[i] = b[i] = static_cast<unsigned char>(i * 7);
  EXPECT_EQ(sampled_fingerprint(a.data(), a.size()), sampled_fingerprint(b.data(), b.size()));
}

TEST(Fingerprint, LengthAndSampledWordsMatter) {
  std::vector<unsigned char> a(1 << 20, 1);
  const uint64_t base = sampled_fingerprint(a.data(), a.size());
  EXPECT_NE(base, sampled_fingerprint(a.data(), a.size() - 8));
  a[0] ^= 1;  // the first sample
  EXPECT_NE(base, sampled_fingerprint(a.data(), a.size()));
  a[0] ^= 1;
  a[a.size() - 1] ^= 1;  // the last word is always sampled
  EXPECT_NE(base, sampled_fingerprint(a.data(), a.size()));
}

TEST(Fingerprint, SmallBuffersAreHashedWhole) {
  std::vector<unsigned char> a(200, 3);
  const uint64_t base = sampled_fingerprint(a.data(), a.size());
  for (size_t i : {size_t{0}, size_t{101}, size_t{199}}) {
    a[i] ^= 0x40;
    EXPECT_NE(base, sampled_fingerprint(a.data(), a.size())) << i;
    a[i] ^= 0x40;
  }
}

TEST(Fingerprint, ChangesBetweenSamplesAreNotSeen) {
  // Documented limit: 33 words are read, not every byte.
  std::vector<unsigned char> a(1 << 20, 5);
  const uint64_t base = sampled_fingerprint(a.data(), a.size());
  a[12345] ^= 1;  // between two samples (stride is ~32 KiB)
  EXPECT_EQ(base, sampled_fingerprint(a.data(), a.size()));
}

}  // namespace
}  // namespace cuxfer::shim
