// Shared helpers for the runtime-API test apps. Plain C++ against
// cuda_runtime_api.h, so each app builds with g++ and runs on the simulated
// CUDA (tests/simcuda) and on a real GPU alike.
//
// Every app: checks every CUDA return code, verifies the data it moved (so a
// shim that corrupts or drops a copy is caught), exits non-zero on failure,
// and exits 77 after printing "no GPU" when no CUDA device is usable (ctest
// SKIP_RETURN_CODE 77): a GPU-tier test must never pass silently.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace testapp {

inline constexpr int kSkip = 77;

[[noreturn]] inline void fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what);
  std::exit(1);
}

#define TA_CHECK(call)                                                                            \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s returned %s (%d): %s\n", __FILE__, __LINE__, #call,        \
                   cudaGetErrorName(e_), static_cast<int>(e_), cudaGetErrorString(e_));          \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

#define TA_ASSERT(cond)                                   \
  do {                                                    \
    if (!(cond)) ::testapp::fail(#cond, __FILE__, __LINE__); \
  } while (0)

// Exits 77 with "no GPU" when the runtime finds no usable device.
inline void require_gpu(const char* app, int min_devices = 1) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n < min_devices) {
    std::printf("%s: no GPU (%s, %d device(s), need %d): skipping\n", app,
                e == cudaSuccess ? "cudaSuccess" : cudaGetErrorName(e), n, min_devices);
    std::fflush(stdout);
    std::exit(kSkip);
  }
}

// Positional argument i as a size; accepts K/M/G suffixes (binary).
inline size_t arg_size(int argc, char** argv, int i, size_t dflt) {
  if (i >= argc) return dflt;
  char* end = nullptr;
  unsigned long long v = std::strtoull(argv[i], &end, 10);
  switch (*end) {
    case 'k': case 'K': v <<= 10; ++end; break;
    case 'm': case 'M': v <<= 20; ++end; break;
    case 'g': case 'G': v <<= 30; ++end; break;
    default: break;
  }
  if (*end || end == argv[i]) {
    std::fprintf(stderr, "bad size argument '%s'\n", argv[i]);
    std::exit(2);
  }
  return static_cast<size_t>(v);
}

// A pattern that differs per seed and per byte position.
inline void fill(void* p, size_t n, uint32_t seed) {
  auto* b = static_cast<unsigned char*>(p);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    b[i] = static_cast<unsigned char>(x >> 24);
  }
}

inline bool matches(const void* p, size_t n, uint32_t seed) {
  auto* b = static_cast<const unsigned char*>(p);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    if (b[i] != static_cast<unsigned char>(x >> 24)) {
      std::fprintf(stderr, "data mismatch at byte %zu of %zu (seed %u)\n", i, n, seed);
      return false;
    }
  }
  return true;
}

// Median of per-step times (the mean of the middle two for an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline void done(const char* app) {
  std::printf("%s: OK\n", app);
  std::fflush(stdout);
}

}  // namespace testapp
