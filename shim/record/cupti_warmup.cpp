#include "record/cupti_warmup.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "core/clock.h"
#include "core/config.h"
#include "record/cupti_collector.h"
#include "record/recorder.h"
#include "symbols/cuda_headers.h"
#include "symbols/symbol_table.h"

namespace cuxfer::shim {
namespace {

constexpr unsigned kMaxContexts = 16;
constexpr size_t kBufferBytes = 256;
constexpr uint64_t kWaitLimitNs = 50'000'000;  // 50 ms; the setup measured 4-5 ms

struct Calls {
  decltype(&::cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&::cuStreamCreate) stream_create = nullptr;
  decltype(&::cuStreamQuery) stream_query = nullptr;
  decltype(&::cuStreamDestroy_v2) stream_destroy = nullptr;
  decltype(&::cuMemAlloc_v2) mem_alloc = nullptr;
  decltype(&::cuMemcpyDtoDAsync_v2) copy_dtod_async = nullptr;
  decltype(&::cuThreadExchangeStreamCaptureMode) exchange_capture_mode = nullptr;
  bool complete() const {
    return ctx_get_current && stream_create && stream_query && stream_destroy && mem_alloc &&
           copy_dtod_async && exchange_capture_mode;
  }
};

// Resolved from libcuda itself: the real functions, never our hooks.
const Calls* calls() {
  static const Calls c = [] {
    Calls r;
    void* cuda = libcuda_handle();
    if (!cuda) return r;
    auto get = [&](const char* name, auto& out) { out = reinterpret_cast<std::decay_t<decltype(out)>>(real_dlsym(cuda, name)); };
    get("cuCtxGetCurrent", r.ctx_get_current);
    get("cuStreamCreate", r.stream_create);
    get("cuStreamQuery", r.stream_query);
    get("cuStreamDestroy_v2", r.stream_destroy);
    get("cuMemAlloc_v2", r.mem_alloc);
    get("cuMemcpyDtoDAsync_v2", r.copy_dtod_async);
    get("cuThreadExchangeStreamCaptureMode", r.exchange_capture_mode);
    return r;
  }();
  return c.complete() ? &c : nullptr;
}

std::atomic<CUcontext> g_warmed[kMaxContexts] = {};
std::atomic<unsigned> g_claimed{0};
std::atomic<unsigned> g_done{0};

// True when `ctx` was claimed before (by this or another thread).
bool seen(CUcontext ctx, unsigned n) {
  for (unsigned i = 0; i < n && i < kMaxContexts; ++i)
    if (g_warmed[i].load(std::memory_order_acquire) == ctx) return true;
  return false;
}

// The copy itself; false when a step failed (nothing else to undo: the
// buffer stays with the context, the stream is destroyed).
bool warm(const Calls& d, CUcontext ctx) {
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (d.exchange_capture_mode(&mode) != CUDA_SUCCESS) return false;
  CUstream stream = nullptr;
  CUdeviceptr buffer = 0;
  bool ok = d.stream_create(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
  ok = ok && CuptiCollector::instance().ignore_stream_of(ctx, stream);
  ok = ok && d.mem_alloc(&buffer, kBufferBytes) == CUDA_SUCCESS;
  ok = ok && d.copy_dtod_async(buffer + kBufferBytes / 2, buffer, 4, stream) == CUDA_SUCCESS;
  // Waited for a while, never for good: behind a kernel that holds every SM
  // until this thread does something later, the copy would not run, and the
  // app's allocation would never return. Left behind, it still runs later
  // (its stream is destroyed without waiting; its buffer is the shim's).
  if (ok) {
    const uint64_t until = now_ns() + kWaitLimitNs;
    CUresult q;
    while ((q = d.stream_query(stream)) == CUDA_ERROR_NOT_READY && now_ns() < until) sched_yield();
    ok = q == CUDA_SUCCESS;
  }
  if (stream) d.stream_destroy(stream);
  d.exchange_capture_mode(&mode);  // the thread's own mode back
  return ok;
}

}  // namespace

void warm_cupti_records(bool capture_open) {
  const unsigned claimed = g_claimed.load(std::memory_order_acquire);
  if (claimed >= kMaxContexts || capture_open || !config().enabled) return;
  CuptiCollector& collector = CuptiCollector::instance();
  if (!collector.active() || collector.detached()) return;
  const Calls* d = calls();
  if (!d) return;
  CUcontext ctx = nullptr;
  if (d->ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx || seen(ctx, claimed)) return;
  // Claim the next slot for this context; one warm-up at a time, so that
  // the collector's list of ignored streams has a single writer.
  static std::atomic<bool> busy{false};
  if (busy.exchange(true, std::memory_order_acq_rel)) return;  // another thread warms: next allocation
  const unsigned slot = g_claimed.load(std::memory_order_acquire);
  if (slot < kMaxContexts && !seen(ctx, slot)) {
    g_warmed[slot].store(ctx, std::memory_order_release);
    g_claimed.store(slot + 1, std::memory_order_release);
    InternalScope internal;
    if (warm(*d, ctx)) g_done.fetch_add(1, std::memory_order_relaxed);
  }
  busy.store(false, std::memory_order_release);
}

void cupti_warmup_forget(CUcontext ctx) {
  if (!ctx) return;
  const unsigned n = std::min(g_claimed.load(std::memory_order_acquire), kMaxContexts);
  for (unsigned i = 0; i < n; ++i) {
    CUcontext expected = ctx;
    g_warmed[i].compare_exchange_strong(expected, reinterpret_cast<CUcontext>(uintptr_t{1}));  // no context's address
  }
}

unsigned cupti_warmups() { return g_done.load(std::memory_order_relaxed); }

}  // namespace cuxfer::shim
