#include "rewrite/staging.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <new>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/quiet_thread.h"
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

// Pinned buffers bound to one context, shared by all threads. The pool is
// filled on a thread of its own, one buffer at a time: pinning costs about
// 0.5 ms per MiB (cuMemHostAlloc, H200), so 128 MiB made inside the app's
// first staged copy held that copy for ~60 ms (issue 12: a 32 MiB first copy
// took 54-74 ms, ten times the driver's own pageable path). Until a buffer is
// ready, staging declines and the copy takes another path.
class Pool {
 public:
  // Starts filling; returns at once. False when the filler cannot start.
  bool start(const Driver& drv, CUcontext ctx, uint64_t budget, std::string& error) {
    const size_t count = std::max<size_t>(1, std::min<size_t>(budget / kChunkBytes, 64));
    buffers_.reserve(count);  // never reallocated: free_ points into it
    free_.reserve(count);
    ctx_ = ctx;
    wanted_ = count;
    if (!spawn_quiet_thread([this, &drv] { fill(drv); })) {
      error = "the staging pool's thread could not be started";
      return false;
    }
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

  // No more buffers are made (context teardown, fork child).
  void stop_filling() { stop_.store(true, std::memory_order_release); }
  // Waits (at most `limit`) until the filler has stopped.
  void wait_filled(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mutex_);
    first_.wait_for(lock, limit, [&] { return filled_.load(std::memory_order_acquire); });
  }
  CUcontext context() const { return ctx_; }
  uint64_t bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return buffers_.size() * kChunkBytes;
  }
  // Every buffer made so far: their allocation-table entries go with the context.
  template <typename F>
  void for_each_buffer(F&& f) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Buffer& b : buffers_) f(b.host);
  }

 private:
  void fill(const Driver& drv);
 public:
  // Waits (at most `limit`) until the first buffer exists; false if none will.
  bool wait_first(std::chrono::milliseconds limit);

 private:
  mutable std::mutex mutex_;
  std::condition_variable first_;
  std::atomic<size_t> made_{0};
  std::atomic<bool> filled_{false};
  std::vector<Buffer> buffers_;
  std::vector<Buffer*> free_;
  CUcontext ctx_ = nullptr;
  size_t wanted_ = 0;
  std::atomic<bool> stop_{false};
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

// One pool buffer's pinning cost, as an event of its own (api
// "cuxfer:staging_pool"), from the filler thread.
void record_pool_event(const void* base, uint64_t bytes, uint64_t t0, uint64_t t1, int status) {
  ThreadState& ts = thread_state();
  trace::Event e{};
  e.t_enter_ns = t0;
  e.t_exit_ns = t1;
  e.bytes = bytes;
  e.address = reinterpret_cast<uint64_t>(base);
  e.thread_id = ts.tid;
  e.api = kStagingPoolApi;
  e.kind = static_cast<uint8_t>(trace::EventKind::HostAlloc);
  e.dst_kind = static_cast<uint8_t>(trace::MemKind::Pinned);
  e.device = -1;
  e.result = status;
  if (status != 0) e.flags |= trace::kFlagFailed;
  Recorder::instance().emit(ts, e);
}


void Pool::fill(const Driver& drv) {
  InternalScope internal;  // nothing this thread does is the app's
  if (drv.ctx_push_current(ctx_) != CUDA_SUCCESS) {
    disable("the staging pool's thread could not bind the app's context");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      filled_.store(true, std::memory_order_release);
    }
    first_.notify_all();
    return;
  }
  for (size_t i = 0; i < wanted_ && !stop_.load(std::memory_order_acquire); ++i) {
    void* host = nullptr;
    const uint64_t t0 = now_ns();
    // Portable, so that it stays pinned for every context of the process.
    CUresult r = drv.host_alloc(&host, kChunkBytes, CU_MEMHOSTALLOC_PORTABLE);
    const uint64_t t1 = now_ns();
    CUevent done = nullptr;
    if (r == CUDA_SUCCESS && drv.event_create(&done, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
      drv.free_host ? (void)drv.free_host(host) : (void)0;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    record_pool_event(host, kChunkBytes, t0, t1, r);
    if (r != CUDA_SUCCESS) {
      // The first buffer failing means no staging at all; a later one, a smaller pool.
      if (i == 0) disable("cuMemHostAlloc of " + std::to_string(kChunkBytes) + " bytes failed (" + std::to_string(r) + ")");
      break;
    }
    // The pool is ours: copies from it are pinned, not the app's pageable memory.
    allocation_table().insert(reinterpret_cast<uint64_t>(host), kChunkBytes, trace::MemKind::Pinned, -1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      buffers_.push_back(Buffer{static_cast<char*>(host), done, false});
      free_.push_back(&buffers_.back());
      made_.fetch_add(1, std::memory_order_release);  // under the lock: wait_first cannot miss it
    }
    first_.notify_all();
  }
  CUcontext popped = nullptr;
  drv.ctx_pop_current(&popped);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    filled_.store(true, std::memory_order_release);
  }
  first_.notify_all();
  Recorder::instance().note("rewrite: pin: staging pool " + std::to_string(made_.load() * (kChunkBytes >> 20)) +
                                " MiB in " + std::to_string(kChunkBytes >> 20) + " MiB buffers, made in the background",
                            /*warning=*/false);
}

bool Pool::wait_first(std::chrono::milliseconds limit) {
  if (made_.load(std::memory_order_acquire) > 0) return true;
  std::unique_lock<std::mutex> lock(mutex_);
  first_.wait_for(lock, limit, [&] {
    return made_.load(std::memory_order_acquire) > 0 || filled_.load(std::memory_order_acquire);
  });
  return made_.load(std::memory_order_acquire) > 0;
}


bool initialise(CUcontext ctx) {
  State& s = state();
  std::call_once(s.once, [&] {
    InternalScope internal;
    const Config& c = config();
    std::string error;
    unsigned threads = c.stage_threads ? c.stage_threads : default_threads();
    s.memcpy = new (std::nothrow) ParallelMemcpy(threads);
    if (!s.memcpy) return disable("out of memory");
    // The pool takes at most half the pinned budget (and 128 MiB); registrations get the rest.
    const uint64_t pool_budget = std::min<uint64_t>(pinned_budget_bytes(c) / 2, kPoolMax);
    if (!s.pool.start(s.drv(), ctx, pool_budget, error)) return disable(error);
    Recorder::instance().note("rewrite: pin: staging with " + std::to_string(threads) + " memcpy threads",
                              /*warning=*/false);
    s.ready.store(true, std::memory_order_release);
  });
  return s.ready.load(std::memory_order_acquire) && !s.disabled.load(std::memory_order_relaxed);
}

enum class Way { HtoD, DtoH };

constexpr size_t kPopulateMin = 16u << 20;

// Whether the middle page of [p, p+n) has never been touched (not resident):
// the sign of memory fresh from mmap (malloc writes a header at its start).
bool looks_fresh(char* p, size_t n) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t mid = (reinterpret_cast<uintptr_t>(p) + n / 2) & ~(page - 1);
  unsigned char resident = 1;
  if (syscall(SYS_mincore, mid, page, &resident) != 0) return false;
  return (resident & 1) == 0;
}

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
  // A fresh destination: its page faults, taken one by one inside each
  // chunk's memcpy, bound the copy (tensor.cpu() into new memory ran at
  // 3-4.7x the driver, issue 12). Fault it in on every memcpy thread now,
  // while the first chunks' DMA runs.
  if (bytes >= kPopulateMin && looks_fresh(host, bytes)) s.memcpy->populate(host, bytes);
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
  // The filler makes no more buffers (it finishes the one it is making: at
  // most one cuMemHostAlloc, a few ms), and every buffer goes with the context.
  s.pool.stop_filling();
  s.pool.wait_filled(std::chrono::seconds(2));
  s.pool.for_each_buffer([](const char* host) { allocation_table().erase(reinterpret_cast<uint64_t>(host)); });
  disable("its staging pool went with a context reset/destroy (cudaDeviceReset)");
}

void staging_prewarm() {
  State& s = state();
  if (s.ready.load(std::memory_order_acquire) || s.disabled.load(std::memory_order_relaxed)) return;
  const Driver* drv = driver_calls();
  if (!drv) return;
  InternalScope internal;
  CUcontext ctx = nullptr;
  if (drv->ctx_get_current(&ctx) == CUDA_SUCCESS && ctx) initialise(ctx);
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
  // Only the first staged copy of a process can find the pool still empty
  // (staging_prewarm() usually started it earlier): it waits for one buffer,
  // a few ms, instead of the whole pool.
  if (!s.pool.wait_first(std::chrono::milliseconds(100))) return false;
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
  return true;
}

}  // namespace cuxfer::shim::rewrite
