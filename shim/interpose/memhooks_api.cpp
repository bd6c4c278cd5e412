// libcuxfer.so's side of shim/memhooks/memhooks_api.h. Called inside the
// app's free/munmap/madvise: host_ranges takes its short mutex, and
// host_memory_going only marks and queues (no driver call, no wait).
#include "memhooks/memhooks_api.h"

#include <atomic>

#include "core/config.h"
#include "core/export.h"
#include "core/ranked_lock.h"
#include "memory/host_ranges.h"
#include "rewrite/pinned_rewrite.h"

using cuxfer::shim::HostSource;
using cuxfer::shim::host_ranges;

extern "C" {

CUXFER_EXPORT uint64_t cuxfer_mem_attach(void) {
  const cuxfer::shim::Config& c = cuxfer::shim::config();
  if (!c.enabled || !c.rewrite_any() || !c.register_in_place) return 0;
  cuxfer::shim::enable_host_tracking(c.register_min);
  cuxfer::shim::rewrite::set_memhooks_attached();
  return c.register_min;
}

CUXFER_EXPORT void cuxfer_mem_allocated(void* p, size_t n, int source) {
  host_ranges().track(reinterpret_cast<uint64_t>(p), n, source == 2 ? HostSource::Mmap : HostSource::Malloc);
}

CUXFER_EXPORT void cuxfer_mem_freeing(void* p) {
  uint64_t end = 0;
  if (host_ranges().untrack_exact(reinterpret_cast<uint64_t>(p), &end))
    cuxfer::shim::rewrite::host_memory_going(reinterpret_cast<uint64_t>(p), end);
}

CUXFER_EXPORT void cuxfer_mem_going(void* p, size_t n) {
  auto b = reinterpret_cast<uint64_t>(p);
  host_ranges().untrack_overlapping(b, b + n);
  cuxfer::shim::rewrite::host_memory_going(b, b + n);
}

CUXFER_EXPORT void cuxfer_mem_discarding(void* p, size_t n) {
  // The memory stays the app's, but its pages are replaced on next touch:
  // the registration (and, not to re-pin it every time, any future one) goes.
  auto b = reinterpret_cast<uint64_t>(p);
  host_ranges().forbid(b, b + n);
  cuxfer::shim::rewrite::host_memory_going(b, b + n);
}

CUXFER_EXPORT int cuxfer_mem_is_mapping(void* p) {
  return host_ranges().source_of(reinterpret_cast<uint64_t>(p)) == HostSource::Mmap;
}

CUXFER_EXPORT int cuxfer_mem_ranges_empty(void) { return host_ranges().empty(); }

CUXFER_EXPORT int cuxfer_mem_registrations_exist(void) { return cuxfer::shim::rewrite::registrations_exist(); }

#ifdef CUXFER_LOCK_ORDER_CHECK
// The hooks may take host_ranges' lock: the caller must hold nothing ranked at
// or above it, whether or not this call's size makes them take it.
CUXFER_EXPORT void cuxfer_mem_check_lock_order(void) {
  cuxfer::shim::lock_order::check(cuxfer::shim::LockRank::kHostRanges, "an allocation or free through the libc hooks");
}
#endif

}  // extern "C"
