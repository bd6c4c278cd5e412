#pragma once
#include <time.h>

#include <cstdint>

#include "core/export.h"

namespace cuxfer::shim {

// CLOCK_MONOTONIC through the vDSO (no system call). CUPTI is told to use the
// same clock, so CPU events and GPU records share one time base.
CUXFER_INLINE uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace cuxfer::shim
