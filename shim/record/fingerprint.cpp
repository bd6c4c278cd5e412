#include "record/fingerprint.h"
#include "core/export.h"

#include <cstring>

namespace cuxfer::shim {
namespace {

constexpr unsigned kSamples = 32;

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

inline uint64_t load(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

CUXFER_HOT uint64_t sampled_fingerprint(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = mix(0x243F6A8885A308D3ull, bytes);
  if (bytes < (kSamples + 1) * 8) {  // small: every byte
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) h = mix(h, load(p + i));
    for (; i < bytes; ++i) h = mix(h, p[i]);
    return h;
  }
  const size_t stride = (bytes - 8) / kSamples;
  for (unsigned k = 0; k < kSamples; ++k) h = mix(h, load(p + k * stride));
  return mix(h, load(p + bytes - 8));
}

CUXFER_HOT void prefetch_fingerprint_samples(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  if (!p || bytes < (kSamples + 1) * 8) return;
  const size_t stride = (bytes - 8) / kSamples;
  for (unsigned k = 0; k < kSamples; ++k) __builtin_prefetch(p + k * stride, 0, 0);
  __builtin_prefetch(p + bytes - 8, 0, 0);
}

}  // namespace cuxfer::shim
