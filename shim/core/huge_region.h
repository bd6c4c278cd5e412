// The tables the stack walks probe at random — the unwinder's rule memo
// (512 KiB) and the Python code table (896 KiB) — carved from one 2 MiB
// region that the kernel may back with a single transparent huge page.
//
// Why: between a training step's copies the app touches more pages than the
// TLB holds, so each probe of these tables lands on a 4 KiB page whose
// translation is gone. One walk of 8 native and 5 Python frames probes ~13
// such pages, and in a VM each miss is a two-dimensional page walk. In one
// huge page they share one translation (docs/benchmarks.md, nineteenth
// session). Where the kernel gives no huge page (transparent huge pages off,
// or none free) the region is ordinary memory, touched page by page as
// before: nothing is lost.
//
// Carved once, never returned: the tables live as long as the process.
// CUXFER_HUGE_TABLES=0 allocates them with calloc instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace cuxfer::shim::huge_region {

inline constexpr std::size_t kRegionBytes = std::size_t{2} << 20;

// One 2 MiB-aligned region of kRegionBytes, marked for a transparent huge
// page (a huge page needs both). carve() hands out zeroed, 64-byte-aligned
// pieces until it is full, then null. Unmapped when destroyed (the
// process's region never is).
class Region {
 public:
  Region() noexcept;
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  void* carve(std::size_t bytes) noexcept;
  bool contains(const void* p) const noexcept {
    const auto a = reinterpret_cast<uintptr_t>(p);
    return base_ != 0 && a >= base_ && a < base_ + kRegionBytes;
  }
  uintptr_t base() const noexcept { return base_; }  // 0: the mapping failed

 private:
  uintptr_t base_ = 0;
  std::size_t used_ = 0;  // under mutex_
  std::mutex mutex_;      // held only to carve (a table's first use)
};

// `bytes` of zeroed memory, 64-byte aligned: from the process's region while
// it has room (and CUXFER_HUGE_TABLES is not 0), else from the heap. Null
// only when both fail.
void* allocate_zeroed(std::size_t bytes) noexcept;
// Frees memory allocate_zeroed() took from the heap; the region's is kept.
void release(void* p) noexcept;
// Whether `p` lies in the process's region.
bool contains(const void* p) noexcept;

}  // namespace cuxfer::shim::huge_region
