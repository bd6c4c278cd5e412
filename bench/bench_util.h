// What the runtime-API benchmarks (rewrite_bandwidth, pattern_sweep) share:
// a CUDA call check that exits, the caller's clock, medians, size arguments.
#pragma once

#include <cuda_runtime_api.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace bench {

// The program's name in CHECK's message; each program sets it first thing.
inline const char* g_program = "bench";

// Exits 1 with the call, the CUDA error and the line when `call` fails.
#define CHECK(call)                                                                               \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s: %s failed: %s (%d) at line %d\n", ::bench::g_program, #call,      \
                   cudaGetErrorName(e_), static_cast<int>(e_), __LINE__);                         \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

inline double now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// "4", "64K", "1M", "1G" (also "4KiB", "4KB"): bytes.
inline bool parse_size(const std::string& s, size_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str()) return false;
  switch (*end) {
    case 'k': case 'K': v <<= 10; ++end; break;
    case 'm': case 'M': v <<= 20; ++end; break;
    case 'g': case 'G': v <<= 30; ++end; break;
    default: break;
  }
  if (*end == 'i' || *end == 'B') ++end;
  if (*end == 'B') ++end;
  if (*end) return false;
  *out = static_cast<size_t>(v);
  return true;
}

}  // namespace bench
