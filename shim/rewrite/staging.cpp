#include "rewrite/staging.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "interpose/cuda_headers.h"
#include "interpose/symbol_table.h"
#include "memory/pointer_classifier.h"
#include "record/recorder.h"
#include "rewrite/driver_calls.h"
#include "rewrite/parallel_memcpy.h"

namespace cuxfer::shim::rewrite {
namespace {

constexpr size_t kChunkBytes = 8u << 20;  // pool buffer size; DMA of 8 MiB takes ~150 us
constexpr size_t kRingPerCall = 4;         // buffers one call cycles through
constexpr uint64_t kPoolMax = 128ull << 20;

// Chunk size for one transfer: at least four chunks where possible, so that
// the host memcpy of one overlaps the DMA of another even for mid-sized
// copies, and no smaller than 1 MiB, below which per-chunk costs dominate.
size_t chunk_for(size_t bytes) {
  size_t quarter = (bytes / 4 + (256u << 10) - 1) & ~size_t((256u << 10) - 1);
  return std::clamp<size_t>(quarter, 1u << 20, kChunkBytes);
}

using Driver = DriverCalls;

struct Buffer {
  char* host = nullptr;
  CUevent done = nullptr;
  bool pending = false;  // its last DMA may still be running
};

// Pinned buffers bound to one context, shared by all threads.
class Pool {
 public:
  bool init(const Driver& drv, CUcontext ctx, uint64_t budget, std::string& error) {
    size_t count = std::max<size_t>(1, std::min<size_t>(budget / kChunkBytes, 64));
    uint64_t t0 = now_ns();
    void* base = nullptr;
    // One allocation, portable so that it stays pinned for every context.
    CUresult r = drv.host_alloc(&base, count * kChunkBytes, CU_MEMHOSTALLOC_PORTABLE);
    uint64_t t1 = now_ns();
    if (r != CUDA_SUCCESS) {
      error = "cuMemHostAlloc of " + std::to_string(count * kChunkBytes) + " bytes failed (" +
              std::to_string(r) + ")";
      return false;
    }
    buffers_.resize(count);
    for (size_t i = 0; i < count; ++i) {
      buffers_[i].host = static_cast<char*>(base) + i * kChunkBytes;
      if (drv.event_create(&buffers_[i].done, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        error = "cuEventCreate failed";
        return false;
      }
      free_.push_back(&buffers_[i]);
    }
    ctx_ = ctx;
    bytes_ = count * kChunkBytes;
    base_ = base;
    alloc_ns_ = t1 - t0;
    alloc_start_ = t0;
    return true;
  }

  // Up to `want` buffers whose last DMA has finished; never waits.
  size_t acquire(const Driver& drv, Buffer** out, size_t want) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t got = 0;
    for (size_t i = 0; i < free_.size() && got < want;) {
      Buffer* b = free_[i];
      if (b->pending && drv.event_query(b->done) != CUDA_SUCCESS) {
        ++i;
        continue;
      }
      b->pending = false;
      out[got++] = b;
      free_[i] = free_.back();
      free_.pop_back();
    }
    return got;
  }

  void release(Buffer** bufs, size_t n, bool pending) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < n; ++i) {
      bufs[i]->pending = bufs[i]->pending || pending;
      free_.push_back(bufs[i]);
    }
  }

  CUcontext context() const { return ctx_; }
  uint64_t bytes() const { return bytes_; }
  void* base() const { return base_; }
  uint64_t alloc_ns() const { return alloc_ns_; }
  uint64_t alloc_start() const { return alloc_start_; }

 private:
  std::mutex mutex_;
  std::vector<Buffer> buffers_;
  std::vector<Buffer*> free_;
  CUcontext ctx_ = nullptr;
  uint64_t bytes_ = 0;
  void* base_ = nullptr;
  uint64_t alloc_ns_ = 0, alloc_start_ = 0;
};

struct State {
  std::once_flag once;
  std::atomic<bool> ready{false};
  std::atomic<bool> disabled{false};
  // Only used once driver_calls() has been checked non-null.
  const Driver& drv() const { return *driver_calls(); }
  Pool pool;
  ParallelMemcpy* memcpy = nullptr;
};

State& state() {
  static State* s = new State;  // used until the last hook; never destroyed
  return *s;
}

unsigned default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return std::clamp(n / 2, 1u, 8u);
}

void disable(const std::string& why) {
  State& s = state();
  if (!s.disabled.exchange(true)) Recorder::instance().note("rewrite: pin disabled: " + why + "; copies pass through");
}

// The pool's pinning cost, as an event of its own (api "cuxfer:staging_pool").
void record_pool_event(const Pool& pool) {
  ThreadState& ts = thread_state();
  trace::Event e{};
  e.t_enter_ns = pool.alloc_start();
  e.t_exit_ns = pool.alloc_start() + pool.alloc_ns();
  e.bytes = pool.bytes();
  e.address = reinterpret_cast<uint64_t>(pool.base());
  e.thread_id = ts.tid;
  e.api = kStagingPoolApi;
  e.kind = static_cast<uint8_t>(trace::EventKind::HostAlloc);
  e.dst_kind = static_cast<uint8_t>(trace::MemKind::Pinned);
  e.device = -1;
  Recorder::instance().emit(ts, e);
}

bool initialise(CUcontext ctx) {
  State& s = state();
  std::call_once(s.once, [&] {
    InternalScope internal;
    const Config& c = config();
    std::string error;
    // The pool takes at most half the pinned budget (and 128 MiB); registrations get the rest.
    const uint64_t pool_budget = std::min<uint64_t>(pinned_budget_bytes(c) / 2, kPoolMax);
    if (!s.pool.init(s.drv(), ctx, pool_budget, error)) return disable(error);
    // The pool is ours: copies from it are pinned, not the app's pageable memory.
    allocation_table().insert(reinterpret_cast<uint64_t>(s.pool.base()), s.pool.bytes(), trace::MemKind::Pinned, -1);
    unsigned threads = c.stage_threads ? c.stage_threads : default_threads();
    s.memcpy = new ParallelMemcpy(threads);
    record_pool_event(s.pool);
    Recorder::instance().note("rewrite: pin: staging pool " + std::to_string(s.pool.bytes() >> 20) + " MiB in " +
                              std::to_string(kChunkBytes >> 20) + " MiB buffers, " + std::to_string(threads) +
                              " memcpy threads",
                              /*warning=*/false);
    s.ready.store(true, std::memory_order_release);
  });
  return s.ready.load(std::memory_order_acquire) && !s.disabled.load(std::memory_order_relaxed);
}

enum class Way { HtoD, DtoH };

// Returns false only if nothing was issued (the caller then passes through).
bool run_htod(State& s, bool per_thread, bool async, CUdeviceptr dev, const char* host, size_t bytes,
              CUstream stream, Buffer** ring, size_t k, CUresult& result) {
  const Driver& d = s.drv();
  const size_t chunk = chunk_for(bytes);
  size_t chunks = (bytes + chunk - 1) / chunk;
  result = CUDA_SUCCESS;
  Buffer* last = nullptr;
  for (size_t i = 0; i < chunks; ++i) {
    Buffer* b = ring[i % k];
    if (i >= k) d.event_synchronize(b->done);  // our own earlier chunk
    size_t off = i * chunk, n = std::min(chunk, bytes - off);
    s.memcpy->copy(b->host, host + off, n);
    CUresult r = d.copy_async(per_thread, dev + off, reinterpret_cast<CUdeviceptr>(b->host), n, stream);
    if (r != CUDA_SUCCESS) {
      if (i == 0) return false;  // nothing happened yet: let the driver report its own error
      result = r;
      break;
    }
    d.record(per_thread, b->done, stream);
    last = b;
  }
  if (!async && last) d.event_synchronize(last->done);
  return true;
}

bool run_dtoh(State& s, bool per_thread, CUdeviceptr dev, char* host, size_t bytes, CUstream stream, Buffer** ring,
              size_t k, CUresult& result) {
  const Driver& d = s.drv();
  const size_t chunk = chunk_for(bytes);
  size_t chunks = (bytes + chunk - 1) / chunk;
  result = CUDA_SUCCESS;
  size_t issued = 0, drained = 0;
  auto issue_next = [&]() -> CUresult {
    Buffer* b = ring[issued % k];
    size_t off = issued * chunk, n = std::min(chunk, bytes - off);
    CUresult r = d.copy_async(per_thread, reinterpret_cast<CUdeviceptr>(b->host), dev + off, n, stream);
    if (r == CUDA_SUCCESS) r = d.record(per_thread, b->done, stream);
    if (r == CUDA_SUCCESS) ++issued;
    return r;
  };
  for (size_t i = 0; i < std::min(k, chunks); ++i) {
    CUresult r = issue_next();
    if (r != CUDA_SUCCESS) {
      if (issued == 0) return false;
      result = r;
      break;
    }
  }
  // Drain in order; refill each buffer with the next chunk as soon as it is empty.
  while (drained < issued) {
    Buffer* b = ring[drained % k];
    CUresult r = d.event_synchronize(b->done);
    if (r != CUDA_SUCCESS) {
      result = r;  // an asynchronous error from the DMA, as the driver would return it
      break;
    }
    size_t off = drained * chunk, n = std::min(chunk, bytes - off);
    s.memcpy->copy(host + off, b->host, n);
    ++drained;
    if (issued < chunks && result == CUDA_SUCCESS) {
      r = issue_next();
      if (r != CUDA_SUCCESS) result = r;
    }
  }
  return true;
}

}  // namespace

bool enabled() {
  static const bool on = config().enabled && config().rewrite_any();  // CUXFER_DISABLE wins
  return on && !state().disabled.load(std::memory_order_relaxed);
}

void staging_teardown(CUcontext ctx) {
  State& s = state();
  if (!s.ready.load(std::memory_order_acquire) || s.disabled.load(std::memory_order_relaxed)) return;
  if (ctx && ctx != s.pool.context()) return;
  allocation_table().erase(reinterpret_cast<uint64_t>(s.pool.base()));  // freed with the context
  disable("its staging pool went with a context reset/destroy (cudaDeviceReset)");
}

void disable_after_fork() { state().disabled.store(true, std::memory_order_relaxed); }

bool try_stage(const CallDesc& desc, int& result, bool any_size) {
  const Config& c = config();
  if (desc.kind != trace::EventKind::Copy || desc.bytes == 0 ||
      (!any_size && desc.bytes < std::min(c.stage_min_h2d, c.stage_min_d2h)))
    return false;
  if (desc.src_preset == trace::MemKind::Array || desc.dst_preset == trace::MemKind::Array) return false;
  ThreadState& ts = thread_state();
  if (ts.internal) return false;
  // Only pageable host memory on one side and device memory on the other.
  PointerInfo src = classify_pointer(desc.src), dst = classify_pointer(desc.dst);
  Way way;
  if (src.kind == trace::MemKind::Pageable && dst.kind == trace::MemKind::Device) way = Way::HtoD;
  else if (src.kind == trace::MemKind::Device && dst.kind == trace::MemKind::Pageable) way = Way::DtoH;
  else return false;
  if (!any_size && desc.bytes < (way == Way::HtoD ? c.stage_min_h2d : c.stage_min_d2h)) return false;
  if (desc.direction != trace::Direction::Unknown &&
      desc.direction != (way == Way::HtoD ? trace::Direction::HtoD : trace::Direction::DtoH))
    return false;

  State& s = state();
  ++ts.internal;  // our own driver calls below are not the app's
  struct Leave {
    ThreadState& ts;
    ~Leave() { --ts.internal; }
  } leave{ts};
  const Driver* drv = driver_calls();
  if (!drv) {
    disable("driver entry points not found");
    return false;
  }
  CUcontext ctx = nullptr;
  if (s.drv().ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) return false;
  if (!s.ready.load(std::memory_order_acquire) && !initialise(ctx)) return false;
  if (s.disabled.load(std::memory_order_relaxed)) return false;
  if (ctx != s.pool.context()) return false;  // one context for now: others pass through
  const bool per_thread = desc.flags & trace::kFlagPerThreadStream;
  const bool async = desc.flags & trace::kFlagAsync;
  CUstream stream = reinterpret_cast<CUstream>(desc.stream);
  if (s.drv().capturing(per_thread, stream)) return false;

  Buffer* ring[kRingPerCall];
  size_t want = std::min(kRingPerCall, (desc.bytes + chunk_for(desc.bytes) - 1) / chunk_for(desc.bytes));
  size_t k = s.pool.acquire(s.drv(), ring, want);
  if (k == 0) return false;
  CUresult r = CUDA_SUCCESS;
  bool done = way == Way::HtoD
                  ? run_htod(s, per_thread, async, desc.dst, reinterpret_cast<const char*>(desc.src), desc.bytes,
                             stream, ring, k, r)
                  : run_dtoh(s, per_thread, desc.src, reinterpret_cast<char*>(desc.dst), desc.bytes, stream, ring,
                             k, r);
  // H2D buffers may still be in flight (async); their events say when they are free.
  s.pool.release(ring, k, way == Way::HtoD);
  if (!done) return false;
  result = static_cast<int>(r);
  ts.staged = true;
  return true;
}

}  // namespace cuxfer::shim::rewrite
