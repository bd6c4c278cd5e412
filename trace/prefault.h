// Faulting in fresh memory that is about to be written in full with one
// system call, instead of taking one page fault per 4 KiB as it is first
// written. The analyzer's record arrays are hundreds of megabytes; their first
// touches were a large part of its time (docs/benchmarks.md, "Analyzer
// throughput"), and MADV_POPULATE_WRITE does the same work for a fraction of
// the per-page cost. A hint only: the memory reads the same either way.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace cuxfer::trace {

// The whole pages inside [p, p + bytes); partial pages at either end are left
// to be faulted as usual. Does nothing on kernels without MADV_POPULATE_WRITE
// (before Linux 5.14) or for small ranges, where a system call saves nothing.
inline void prefault_for_write(void* p, size_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (bytes < (1u << 20)) return;
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const auto end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace cuxfer::trace
