// The shim's allocations and their reserve (allocation.h); the operators
// that use them are in operator_new.cpp.
#include "core/allocation.h"
#include "core/export.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace cuxfer::shim::allocation {
namespace {

// Zero pages in .bss: costs no memory until the day it is needed.
alignas(4096) CUXFER_LARGE_BSS unsigned char g_reserve[kReserveBytes];
std::atomic<std::size_t> g_reserve_used{0};
std::atomic<bool> g_exhausted{false};
std::atomic<OutOfMemoryHandler> g_handler{nullptr};

void say(const char* line, std::size_t n) {
  ssize_t ignored = ::write(STDERR_FILENO, line, n);
  (void)ignored;
}

bool in_reserve(const void* p) {
  auto a = reinterpret_cast<std::uintptr_t>(p);
  auto b = reinterpret_cast<std::uintptr_t>(g_reserve);
  return a >= b && a < b + kReserveBytes;
}

// malloc failed: serve `n` bytes from the reserve, and stop recording.
void* from_reserve(std::size_t n, std::size_t align) {
  if (!g_exhausted.exchange(true, std::memory_order_acq_rel)) {
    static const char kLine[] =
        "cuxfer: out of memory inside the shim: it stops recording here, and every CUDA call from now on runs as "
        "without cuxfer\n";
    say(kLine, sizeof kLine - 1);
    if (OutOfMemoryHandler h = g_handler.load(std::memory_order_acquire)) h();
  }
  if (align < alignof(std::max_align_t)) align = alignof(std::max_align_t);
  std::size_t used = g_reserve_used.load(std::memory_order_relaxed);
  for (;;) {
    std::size_t start = (used + align - 1) & ~(align - 1);
    if (start > kReserveBytes || n > kReserveBytes - start) break;
    if (g_reserve_used.compare_exchange_weak(used, start + n, std::memory_order_relaxed)) return g_reserve + start;
  }
  // Nothing left to give and no way to say "no" (this form may not return
  // null and may not throw): the process is out of memory for good.
  static const char kSpent[] = "cuxfer: out of memory inside the shim, and its reserve is spent: aborting\n";
  say(kSpent, sizeof kSpent - 1);
  std::abort();
}

}  // namespace

void* serve_from_reserve(std::size_t n, std::size_t align) { return from_reserve(n, align); }

void set_out_of_memory_handler(OutOfMemoryHandler handler) {
  g_handler.store(handler, std::memory_order_release);
  // An allocation may have failed before the handler was known (a static constructor).
  if (handler && g_exhausted.load(std::memory_order_acquire)) handler();
}

void* try_allocate(std::size_t n) { return std::malloc(n ? n : 1); }

void* try_allocate_aligned(std::size_t n, std::size_t align) {
  void* p = nullptr;
  return ::posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, n ? n : 1) == 0 ? p : nullptr;
}

void* allocate(std::size_t n) {
  if (void* p = try_allocate(n)) return p;
  return from_reserve(n, alignof(std::max_align_t));
}

void* allocate_aligned(std::size_t n, std::size_t align) {
  if (void* p = try_allocate_aligned(n, align)) return p;
  return from_reserve(n, align);
}

void release(void* p) {
  if (p && !in_reserve(p)) std::free(p);  // the reserve is never reused
}

bool exhausted() { return g_exhausted.load(std::memory_order_acquire); }

}  // namespace cuxfer::shim::allocation

