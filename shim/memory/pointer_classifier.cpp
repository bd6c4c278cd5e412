#include "memory/pointer_classifier.h"
#include "core/export.h"

#include <cuda.h>

#include <atomic>

#include "symbols/symbol_table.h"

namespace cuxfer::shim {
namespace {

using PointerGetAttributesFn = CUresult (*)(unsigned int, CUpointer_attribute*, void**, CUdeviceptr);

PointerGetAttributesFn pointer_get_attributes() {
  static std::atomic<void*> fn{nullptr};
  void* p = fn.load(std::memory_order_acquire);
  if (!p) {
    void* h = libcuda_handle();
    p = h ? real_dlsym(h, "cuPointerGetAttributes") : nullptr;
    if (p) fn.store(p, std::memory_order_release);
  }
  return reinterpret_cast<PointerGetAttributesFn>(p);
}

PointerInfo ask_driver(uint64_t ptr) {
  PointerInfo info;
  info.kind = trace::MemKind::Pageable;
  auto fn = pointer_get_attributes();
  if (!fn) return info;  // no driver loaded: nothing CUDA knows of, so pageable
  info.from_driver = true;
  unsigned int memory_type = 0;
  unsigned int is_managed = 0;
  int ordinal = -1;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* values[] = {&memory_type, &is_managed, &ordinal};
  if (fn(3, attrs, values, static_cast<CUdeviceptr>(ptr)) != CUDA_SUCCESS) return info;
  if (is_managed) info.kind = trace::MemKind::Managed;
  else if (memory_type == CU_MEMORYTYPE_DEVICE) info.kind = trace::MemKind::Device;
  else if (memory_type == CU_MEMORYTYPE_HOST) info.kind = trace::MemKind::Pinned;  // or registered: the driver does not say
  else if (memory_type == CU_MEMORYTYPE_ARRAY) info.kind = trace::MemKind::Array;
  info.device = static_cast<int8_t>(ordinal);
  return info;
}

// The driver's answers for memory the allocation table does not hold, a few
// pages per thread: copy loops hit the same buffers again and again (a
// training step cycles through a ring of pageable batches). Each entry also
// keeps the exact pointer it was asked for: while the table's generation
// stands, that pointer is not in the table either, so it is answered before
// the table's search (a page may hold both table memory and other memory,
// so the page alone is only trusted after the search).
struct CacheEntry {
  uint64_t page = ~0ull;
  uint64_t generation = ~0ull;
  uint64_t ptr = 0;
  PointerInfo info;
};
constexpr unsigned kCacheEntries = 64;
constexpr unsigned kCacheShift = 58;  // 64 - log2(kCacheEntries)
thread_local CacheEntry t_cache[kCacheEntries] __attribute__((tls_model("initial-exec")));

// The allocations this thread's last lookups found, most recent first: a
// copy loop names the same device buffer and pinned buffer call after call,
// and a hit here (valid while the table's generation stands) costs a few
// compares instead of the table's binary search.
struct RecentHit {
  uint64_t generation = ~0ull;
  uint64_t begin = 0, end = 0;
  PointerInfo info;
};
constexpr unsigned kRecentHits = 4;
thread_local RecentHit t_recent[kRecentHits] __attribute__((tls_model("initial-exec")));

}  // namespace

CUXFER_HOT AllocationTable& allocation_table() {
  static AllocationTable* table = new AllocationTable;  // never destroyed: used until the last hook
  return *table;
}

CUXFER_HOT PointerInfo classify_pointer(uint64_t ptr) {
  if (ptr == 0) return {};
  AllocationTable& table = allocation_table();
  uint64_t generation = table.generation();
  for (unsigned i = 0; i < kRecentHits; ++i) {
    const RecentHit& h = t_recent[i];
    if (h.generation == generation && ptr - h.begin < h.end - h.begin) return h.info;
  }
  const uint64_t page = ptr >> 12;
  CacheEntry& e = t_cache[(page * 0x9E3779B97F4A7C15ull) >> kCacheShift];
  if (e.ptr == ptr && e.generation == generation) return e.info;
  if (auto a = table.find(ptr)) {
    const PointerInfo info{a->kind, a->device, false};
    for (unsigned i = kRecentHits - 1; i > 0; --i) t_recent[i] = t_recent[i - 1];
    t_recent[0] = RecentHit{generation, a->begin, a->end, info};
    return info;
  }
  if (e.page == page && e.generation == generation) {
    e.ptr = ptr;
    return e.info;
  }
  PointerInfo info = ask_driver(ptr);
  e.page = page;
  e.generation = generation;
  e.ptr = ptr;
  e.info = info;
  return info;
}

uint64_t forget_app_range(uint64_t address) {
  AllocationTable& table = allocation_table();
  if (auto a = table.find(address); a && a->begin == address && a->kind == trace::MemKind::Pageable) return 0;
  auto a = table.erase(address);
  return a ? a->end - a->begin : 0;
}

void reset_pointer_cache() {
  for (auto& e : t_cache) e = CacheEntry{};
  for (auto& h : t_recent) h = RecentHit{};
}

}  // namespace cuxfer::shim
