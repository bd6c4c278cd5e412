// The zero-copy context apps' shared pieces (zero_copy_contexts.cpp,
// zero_copy_teardown.cpp, zero_copy_races.cpp): one allocation site for every context, which a
// zero_copy policy names once, and the storm of copies each context makes.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

#include "driver_common.h"

namespace zero_copy_storm {

// The allocation site the policy names (its symbol: alloc_buffer).
__attribute__((noinline)) inline CUdeviceptr alloc_buffer(size_t bytes) {
  CUdeviceptr d = 0;
  DA_CHECK(cuMemAlloc(&d, bytes));
  return d;
}

// N copies of S bytes into the buffer's slots, then the whole buffer back.
inline void storm(CUdeviceptr d, size_t n, size_t s, uint32_t seed) {
  std::vector<unsigned char> src(n * s), back(n * s, 0);
  testapp::fill(src.data(), src.size(), seed);
  for (size_t i = 0; i < n; ++i) DA_CHECK(cuMemcpyHtoD(d + i * s, src.data() + i * s, s));
  DA_CHECK(cuMemcpyDtoH(back.data(), d, n * s));
  TA_ASSERT(testapp::matches(back.data(), back.size(), seed));
}

// Spins (yielding) until another thread's counter reaches `at_least`.
inline void wait_for(const std::atomic<size_t>& v, size_t at_least) {
  while (v.load() < at_least) std::this_thread::yield();
}

}  // namespace zero_copy_storm
