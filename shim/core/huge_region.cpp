#include "core/huge_region.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/config.h"

namespace cuxfer::shim::huge_region {

namespace {

constexpr std::size_t round_to_line(std::size_t n) { return (n + 63) & ~std::size_t{63}; }

std::atomic<Region*> g_region{nullptr};

// The process's region, made on first use; never destroyed (the tables in it
// are used until exit, by atexit handlers' copies too).
Region* process_region() {
  if (Region* r = g_region.load(std::memory_order_acquire)) return r;
  static std::mutex make;
  std::lock_guard<std::mutex> lock(make);
  if (Region* r = g_region.load(std::memory_order_acquire)) return r;
  Region* r = new (std::nothrow) Region;
  g_region.store(r, std::memory_order_release);
  return r;
}

}  // namespace

Region::Region() noexcept {
  // Twice the size, then the unaligned ends unmapped: what is left is aligned.
  const std::size_t span = 2 * kRegionBytes;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  const auto start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t base = (start + kRegionBytes - 1) & ~(uintptr_t{kRegionBytes} - 1);
  if (base > start) munmap(p, base - start);
  if (const uintptr_t end = base + kRegionBytes; end < start + span)
    munmap(reinterpret_cast<void*>(end), start + span - end);
  // Advice only: refused (a kernel without THP), the region is 4 KiB pages.
  madvise(reinterpret_cast<void*>(base), kRegionBytes, MADV_HUGEPAGE);
  base_ = base;
}

Region::~Region() {
  if (base_) munmap(reinterpret_cast<void*>(base_), kRegionBytes);
}

void* Region::carve(std::size_t bytes) noexcept {
  const std::size_t rounded = round_to_line(bytes ? bytes : 1);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!base_ || rounded > kRegionBytes - used_) return nullptr;
  void* p = reinterpret_cast<void*>(base_ + used_);  // never handed out before: zero
  used_ += rounded;
  return p;
}

void* allocate_zeroed(std::size_t bytes) noexcept {
  if (config().huge_tables) {
    if (Region* r = process_region())
      if (void* p = r->carve(bytes)) return p;
  }
  const std::size_t rounded = round_to_line(bytes ? bytes : 1);
  void* p = nullptr;
  if (posix_memalign(&p, 64, rounded) != 0) return nullptr;
  return std::memset(p, 0, rounded);
}

void release(void* p) noexcept {
  if (p && !contains(p)) std::free(p);
}

bool contains(const void* p) noexcept {
  const Region* r = g_region.load(std::memory_order_acquire);
  return r && r->contains(p);
}

}  // namespace cuxfer::shim::huge_region
