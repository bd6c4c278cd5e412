#include "rewrite/staging.h"
#include "core/export.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

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
#include "core/event_clock.h"
#include "core/log.h"
#include "core/quiet_thread.h"
#include "core/ranked_lock.h"
#include "symbols/cuda_headers.h"
#include "symbols/symbol_table.h"
#include "memory/pointer_classifier.h"
#include "record/recorder.h"
#include "rewrite/driver_calls.h"
#include "rewrite/parallel_memcpy.h"
#include "rewrite/registration_cache.h"

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
  // A DMA of it may still be running and no event says when (its record and
  // the stream's wait both failed: a broken context): never handed out
  // again, freed with the pool.
  bool withheld = false;
};

// Pinned buffers bound to one context, shared by all threads. The pool is
// made on a thread of its own, one buffer at a time, started before the
// first copy that needs it, so that pinning never happens inside an app's
// copy and never holds the driver for long: 128 MiB made at once by
// cuMemHostAlloc (~0.5 ms per MiB on the H200) held the app's first staged
// copy ~60 ms (issue 12) and, moved to a thread, held the driver's lock as
// long, stalling the app's next call by 25 ms. A buffer is anonymous memory
// of the shim's own (transparent huge pages asked for, faulted in) registered
// with cuMemHostRegister: ~0.05 ms per MiB under the driver's lock.
class Pool {
 public:
  // Starts the filler; returns at once. False when it cannot start.
  // `initial`: how many buffers to make now (at most the budget's count).
  bool start(const Driver& drv, CUcontext ctx, uint64_t budget, size_t initial, std::string& error) {
    const size_t count = std::max<size_t>(1, std::min<size_t>(budget / kChunkBytes, 64));
    buffers_.reserve(count);  // never reallocated: free_ points into it
    free_.reserve(count);
    ctx_ = ctx;
    max_ = count;
    wanted_ = std::clamp<size_t>(initial, 1, count);  // made in the background at ~1 ms a buffer
    if (!spawn_quiet_thread([this, &drv] { fill(drv); })) {
      error = "the staging pool's thread could not be started";
      return false;
    }
    return true;
  }

  // Up to `want` buffers whose last DMA has finished; never waits.
  size_t acquire(const Driver& drv, Buffer** out, size_t want) {
    std::lock_guard<RankedMutex> lock(mutex_);
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
    // Fewer than wanted: ask the filler for more (up to the budget).
    if (got < want && wanted_ < max_) {
      wanted_ = std::min(max_, std::max(wanted_, buffers_.size() + (want - got)));
      demand_.notify_one();
    }
    return got;
  }

  void release(Buffer** bufs, size_t n, bool pending) {
    bool withheld = false;
    {
      std::lock_guard<RankedMutex> lock(mutex_);
      for (size_t i = 0; i < n; ++i) {
        if (bufs[i]->withheld) {
          withheld = true;
          continue;
        }
        bufs[i]->pending = bufs[i]->pending || pending;
        free_.push_back(bufs[i]);
      }
      ++releases_;
    }
    first_.notify_all();  // a caller waiting while the pool is made (wait_buffer)
    if (withheld) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true))
        Recorder::instance().note("rewrite: pin: a staging buffer whose copy could be neither tracked nor waited "
                                  "for (the context failed) is no longer used");
    }
  }

  // Gives every buffer back to the system before the pool's context goes
  // (the filler has stopped: wait_filled()): its allocation-table entry, its
  // registration, its event, its memory. The pool can then start again for
  // another context.
  // `context_alive` false: the context is already gone (a primary context's
  // last release) and its events with it; the unregistration is still asked
  // for, with whatever context this thread has (harmless where the driver
  // dropped it with the context, needed where it did not), so that no
  // registration outlives the unmap.
  void free_all(const Driver& drv, bool context_alive = true) {
    std::lock_guard<RankedMutex> lock(mutex_);
    for (const Buffer& b : buffers_) {
      allocation_table().erase(reinterpret_cast<uint64_t>(b.host));
      drv.host_unregister(b.host);
      if (context_alive && drv.event_destroy) drv.event_destroy(b.done);
      syscall(SYS_munmap, b.host, kChunkBytes);
    }
    buffers_.clear();
    free_.clear();
    releases_ = 0;
    wanted_ = max_ = 0;
    ctx_ = nullptr;
    stop_.store(false, std::memory_order_relaxed);
    filled_.store(false, std::memory_order_relaxed);
  }

  // The whole budget from now on (a copy that may need staging was seen).
  void want_all() {
    {
      std::lock_guard<RankedMutex> lock(mutex_);
      if (wanted_ >= max_) return;
      wanted_ = max_;
    }
    demand_.notify_one();
  }

  // No more buffers are made (context teardown, fork child).
  void stop_filling() {
    {
      std::lock_guard<RankedMutex> lock(mutex_);
      stop_.store(true, std::memory_order_release);
    }
    demand_.notify_all();
  }
  // Whether the filler is still making the pool (its first ~20 ms on the
  // H200, a few hundred ms on a loaded CI machine's simulated driver).
  bool growing() const {
    std::lock_guard<RankedMutex> lock(mutex_);
    return buffers_.size() < wanted_ && !filled_.load(std::memory_order_acquire);
  }
  // While the pool is being made: waits until a buffer is made or given
  // back, the pool is complete, or `until`. False when there is nothing to
  // wait for any more.
  bool wait_buffer(std::chrono::steady_clock::time_point until) {
    RankedUniqueLock lock(mutex_);
    if (buffers_.size() >= wanted_ || filled_.load(std::memory_order_acquire)) return false;
    const size_t made = buffers_.size();
    const uint64_t seen = releases_;
    return first_.wait_until(lock.get(), until, [&] {
      return buffers_.size() != made || releases_ != seen || filled_.load(std::memory_order_acquire);
    });
  }

  // Waits (at most `limit`) until the filler has stopped.
  bool wait_filled(std::chrono::milliseconds limit) {
    RankedUniqueLock lock(mutex_);
    return first_.wait_for(lock.get(), limit, [&] { return filled_.load(std::memory_order_acquire); });
  }
  CUcontext context() const { return ctx_; }
  uint64_t bytes() const {
    std::lock_guard<RankedMutex> lock(mutex_);
    return buffers_.size() * kChunkBytes;
  }
  // Every buffer made so far: their allocation-table entries go with the context.
  template <typename F>
  void for_each_buffer(F&& f) const {
    std::lock_guard<RankedMutex> lock(mutex_);
    for (const Buffer& b : buffers_) f(b.host);
  }

 private:
  void fill(const Driver& drv);

  mutable RankedMutex mutex_{LockRank::kStagingPool};
  std::condition_variable first_;  // a buffer was made or given back, or the filler stopped
  std::atomic<bool> filled_{false};
  std::vector<Buffer> buffers_;
  std::vector<Buffer*> free_;
  std::condition_variable demand_;    // wanted_ grew, or stop_
  uint64_t releases_ = 0;
  CUcontext ctx_ = nullptr;
  size_t max_ = 0;     // the budget, in buffers
  size_t wanted_ = 0;  // buffers asked for so far (under mutex_)
  std::atomic<bool> stop_{false};
};

// One context's pool. Every context the app makes gets its own, made on its
// first copy that may need staging (or its first device allocation), given
// back before the context goes (staging_teardown): PyCUDA makes a context per
// test, a process per GPU makes one per device. A copy holds `users` while it
// uses the pool; teardown waits for none.
struct ContextPool {
  std::atomic<CUcontext> ctx{nullptr};  // null: a free slot
  std::atomic<int> users{0};
  std::atomic<bool> whole{false};  // asked for its whole budget
  Pool pool;
};
constexpr int kMaxContexts = 16;

struct State {
  std::once_flag once;
  std::atomic<bool> ready{false};  // the memcpy threads are made
  std::atomic<bool> disabled{false};
  // Why, once disabled: what the copies that pass through from then on record.
  std::atomic<trace::PassthroughReason> off_reason{trace::PassthroughReason::None};
  // Only used once driver_calls() has been checked non-null.
  const Driver& drv() const { return *driver_calls(); }
  ParallelMemcpy* memcpy = nullptr;
  uint64_t pool_budget = 0;  // each context's pool at most
  mutable RankedMutex pools_mutex{LockRank::kStagingContexts};  // making and giving back pools
  ContextPool pools[kMaxContexts];
  // For staging_prewarm(Whole)'s one-load answer on every large copy: a pool
  // was made, and how many live pools still have only one copy's buffers.
  std::atomic<bool> any_pool{false};
  std::atomic<int> partial_pools{0};
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
  trace::PassthroughReason none = trace::PassthroughReason::None;
  s.off_reason.compare_exchange_strong(none, trace::PassthroughReason::RewriteDisabled);
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
  e.result = trace::record_result(status);
  if (status != 0) e.flags |= trace::kFlagFailed;
  Recorder::instance().emit(ts, e);
}


// One pool buffer: anonymous memory of the shim's own, mapped with raw
// system calls (the libc hooks must not take it for the app's), on huge pages
// where the kernel gives them (fewer pages for the DMA engine to walk),
// faulted in, then registered portable so that every context sees it pinned.
char* make_buffer(const Driver& drv, CUresult& r) {
  constexpr size_t kHuge = 2u << 20;
  const size_t span = kChunkBytes + kHuge;
  void* raw = reinterpret_cast<void*>(
      syscall(SYS_mmap, nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (raw == MAP_FAILED) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
    return nullptr;
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (base + kHuge - 1) & ~uintptr_t(kHuge - 1);
  if (aligned > base) syscall(SYS_munmap, base, aligned - base);
  if (aligned + kChunkBytes < base + span) syscall(SYS_munmap, aligned + kChunkBytes, base + span - aligned - kChunkBytes);
  char* p = reinterpret_cast<char*>(aligned);
  syscall(SYS_madvise, p, kChunkBytes, MADV_HUGEPAGE);  // a hint: fine if refused
  // Fault it in before pinning (registering touched pages is ~6x cheaper), a
  // write per page, not MADV_POPULATE_WRITE: that holds the process's mmap
  // lock for the whole range, and the app's munmap()/free() of a large block
  // waited for it, 7-14 ms a call on a 2-core runner (faulting by touch takes
  // per-VMA locks and leaves munmap at ~0.1 ms; 1.4x slower, off the app's thread).
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t off = 0; off < kChunkBytes; off += page) reinterpret_cast<volatile char*>(p)[off] = 0;
  // A queued stale registration could cover this new address: drained even
  // beside a graph capture (this thread is the shim's, in relaxed mode).
  detail::drain_process_cache();
  r = drv.host_register(p, kChunkBytes, CU_MEMHOSTREGISTER_PORTABLE);
  if (r != CUDA_SUCCESS) {
    syscall(SYS_munmap, p, kChunkBytes);
    return nullptr;
  }
  return p;
}

void Pool::fill(const Driver& drv) {
  InternalScope internal;  // nothing this thread does is the app's
  bool bound = false;
  for (;;) {
    {
      RankedUniqueLock lock(mutex_);
      demand_.wait(lock.get(), [&] { return stop_.load(std::memory_order_acquire) || buffers_.size() < wanted_; });
      if (stop_.load(std::memory_order_acquire)) break;
    }
    if (!bound && drv.ctx_push_current(ctx_) != CUDA_SUCCESS) {
      disable("the staging pool's thread could not bind the app's context");
      break;
    }
    if (!bound && drv.exchange_capture_mode) {
      // This thread pins and unpins buffers whenever the app runs low: in
      // relaxed capture mode, so that an app's graph capture in global mode
      // on another thread is never invalidated by it (driver_calls.h). Set
      // once the context is bound, for the thread's life: it is the shim's.
      CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
      drv.exchange_capture_mode(&relaxed);
    }
    bound = true;
    CUresult r = CUDA_SUCCESS;
    const uint64_t t0 = event_clock::stamp();  // the event's stamps (core/event_clock.h)
    char* host = make_buffer(drv, r);
    const uint64_t t1 = event_clock::stamp();
    CUevent done = nullptr;
    if (host && drv.event_create(&done, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
      drv.host_unregister(host);
      syscall(SYS_munmap, host, kChunkBytes);
      host = nullptr;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    record_pool_event(host, kChunkBytes, t0, t1, r);
    if (!host) {
      // The first buffer failing means no staging at all; a later one, a smaller pool.
      bool none;
      {
        std::lock_guard<RankedMutex> lock(mutex_);
        none = buffers_.empty();
      }
      if (none)
        disable("pinning a staging buffer of " + std::to_string(kChunkBytes) + " bytes failed (" + std::to_string(r) + ")");
      break;
    }
    // The pool is ours: copies from it are pinned, not the app's pageable memory.
    allocation_table().insert(reinterpret_cast<uint64_t>(host), kChunkBytes, trace::MemKind::Pinned, -1);
    {
      std::lock_guard<RankedMutex> lock(mutex_);
      buffers_.push_back(Buffer{host, done, false});
      free_.push_back(&buffers_.back());  // under the lock: wait_buffer cannot miss it
    }
    first_.notify_all();
  }
  if (bound) {
    CUcontext popped = nullptr;
    drv.ctx_pop_current(&popped);
  }
  {
    std::lock_guard<RankedMutex> lock(mutex_);
    filled_.store(true, std::memory_order_release);
  }
  first_.notify_all();
}

// The memcpy threads and the budget, once per process.
bool initialise() {
  State& s = state();
  std::call_once(s.once, [&] {
    InternalScope internal;
    const Config& c = config();
    unsigned threads = c.stage_threads ? c.stage_threads : default_threads();
    s.memcpy = new (std::nothrow) ParallelMemcpy(threads);
    if (!s.memcpy) return disable("out of memory");
    // A pool takes at most half the pinned budget (and 128 MiB); registrations get the rest.
    s.pool_budget = std::min<uint64_t>(pinned_budget_bytes(c) / 2, kPoolMax);
    Recorder::instance().note("rewrite: pin: staging with " + std::to_string(threads) + " memcpy threads",
                              /*warning=*/false);
    s.ready.store(true, std::memory_order_release);
  });
  return s.ready.load(std::memory_order_acquire) && !s.disabled.load(std::memory_order_relaxed);
}

ContextPool* find_pool(State& s, CUcontext ctx) {
  for (ContextPool& p : s.pools)
    if (p.ctx.load(std::memory_order_acquire) == ctx) return &p;
  return nullptr;
}

// The pool of `ctx`, made (with `initial` buffers first) if it has none.
// Null when every slot is taken or the pool cannot start.
ContextPool* pool_for(State& s, CUcontext ctx, size_t initial) {
  if (ContextPool* p = find_pool(s, ctx)) return p;
  std::string error;
  {
    // Notes are written after the lock: the recorder's locks rank above it.
    std::lock_guard<RankedMutex> lock(s.pools_mutex);
    if (ContextPool* p = find_pool(s, ctx)) return p;
    for (ContextPool& p : s.pools) {
      if (p.ctx.load(std::memory_order_acquire) != nullptr) continue;
      if (!p.pool.start(s.drv(), ctx, s.pool_budget, initial, error)) break;
      p.whole.store(initial >= SIZE_MAX, std::memory_order_relaxed);
      if (initial < SIZE_MAX) s.partial_pools.fetch_add(1, std::memory_order_acq_rel);
      s.any_pool.store(true, std::memory_order_release);
      p.ctx.store(ctx, std::memory_order_release);
      return &p;
    }
  }
  if (!error.empty()) {
    disable(error);
    return nullptr;
  }
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    Recorder::instance().note("rewrite: pin: more than " + std::to_string(kMaxContexts) +
                              " contexts at once; copies in the others pass through");
  return nullptr;
}

// A copy's hold on its context's pool (teardown waits for it to end).
class PoolUse {
 public:
  // Sequentially consistent, with teardown's store of the slot and load of
  // `users`: each side stores, then loads what the other stored (either the
  // copy sees the slot given back, or teardown sees the copy).
  PoolUse(ContextPool* p, CUcontext ctx) : p_(p) {
    if (!p_) return;
    p_->users.fetch_add(1, std::memory_order_seq_cst);
    if (p_->ctx.load(std::memory_order_seq_cst) != ctx) {  // given back meanwhile
      p_->users.fetch_sub(1, std::memory_order_acq_rel);
      p_ = nullptr;
    }
  }
  ~PoolUse() {
    if (p_) p_->users.fetch_sub(1, std::memory_order_acq_rel);
  }
  PoolUse(const PoolUse&) = delete;
  PoolUse& operator=(const PoolUse&) = delete;
  explicit operator bool() const { return p_ != nullptr; }
  Pool& pool() const { return p_->pool; }

 private:
  ContextPool* p_;
};

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
  // Once recording a buffer's event failed, the stream says when its DMA is
  // done instead (each chunk waited for): no buffer goes back to the pool, or
  // is filled again, while a DMA may still read it.
  bool events_ok = true;
  for (size_t i = 0; i < chunks; ++i) {
    Buffer* b = ring[i % k];
    if (i >= k && events_ok) {
      // Our own earlier chunk must have left the buffer. Its DMA's failure
      // is this copy's error, as the driver would return it.
      const CUresult w = d.event_synchronize(b->done);
      if (w != CUDA_SUCCESS) {
        result = w;
        return true;
      }
    }
    size_t off = i * chunk, n = std::min(chunk, bytes - off);
    s.memcpy->copy(b->host, host + off, n);
    CUresult r = d.copy_async(per_thread, dev + off, reinterpret_cast<CUdeviceptr>(b->host), n, stream);
    if (r != CUDA_SUCCESS) {
      if (i == 0) return false;  // nothing happened yet: let the driver report its own error
      result = r;
      break;
    }
    if (events_ok && d.record(per_thread, b->done, stream) != CUDA_SUCCESS) events_ok = false;
    if (!events_ok) {
      const CUresult w = d.sync_stream(per_thread, stream);
      if (w != CUDA_SUCCESS) {
        b->withheld = true;  // its DMA may still read it: never refilled
        result = w;
        return true;
      }
      last = nullptr;
      continue;
    }
    last = b;
  }
  // A synchronous copy returns when its DMA is done, with the DMA's error if it failed.
  if (!async && last) {
    const CUresult w = d.event_synchronize(last->done);
    if (result == CUDA_SUCCESS) result = w;
  }
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
    if (r != CUDA_SUCCESS) return r;
    r = d.record(per_thread, b->done, stream);
    if (r != CUDA_SUCCESS) {
      // The DMA into the buffer is queued but no event tracks it: it must be
      // over before the buffer goes back to the pool (then this copy fails,
      // or passes through when it was the first chunk). Where even that wait
      // fails, the DMA may still write into it: it never goes back.
      if (d.sync_stream(per_thread, stream) != CUDA_SUCCESS) b->withheld = true;
      return r;
    }
    ++issued;
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

CUXFER_HOT bool enabled() {
  static const bool on = config().enabled && config().rewrite_any();  // CUXFER_DISABLE wins
  return on && !state().disabled.load(std::memory_order_relaxed);
}

void staging_teardown(CUcontext ctx) {
  State& s = state();
  if (!s.ready.load(std::memory_order_acquire) || s.disabled.load(std::memory_order_relaxed)) return;
  const Driver* drv = driver_calls();
  if (!drv) return;
  InternalScope internal;
  bool stuck = false;
  {
  std::lock_guard<RankedMutex> lock(s.pools_mutex);
  for (ContextPool& p : s.pools) {
    CUcontext owner = p.ctx.load(std::memory_order_acquire);
    // A primary context's reset names no context: every pool goes, and the
    // ones of contexts that stay are made again on their next copy. A slot
    // marked stuck or going (1, 2) holds no context to bind.
    if (reinterpret_cast<uintptr_t>(owner) <= 2 || (ctx && owner != ctx)) continue;
    p.ctx.store(nullptr, std::memory_order_seq_cst);  // no copy finds it from now on (PoolUse)
    if (!p.whole.exchange(true)) s.partial_pools.fetch_sub(1, std::memory_order_acq_rel);
    // A copy still using it would be the app's copy in a context it is
    // destroying; wait for it a little all the same.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (p.users.load(std::memory_order_seq_cst) != 0 && std::chrono::steady_clock::now() < until) sched_yield();
    // The filler makes no more buffers (it finishes the one it is making: at
    // most one registration, a few ms); then every buffer is given back while
    // the context still exists.
    p.pool.stop_filling();
    if (!p.pool.wait_filled(std::chrono::seconds(2)) || p.users.load(std::memory_order_acquire) != 0) {
      p.ctx.store(reinterpret_cast<CUcontext>(uintptr_t{1}), std::memory_order_release);  // never reused
      stuck = true;
      continue;
    }
    // Its buffers were registered with its context current: given back the same way.
    const bool pushed = drv->ctx_push_current(owner) == CUDA_SUCCESS;
    p.pool.free_all(*drv);
    if (pushed) {
      CUcontext popped = nullptr;
      drv->ctx_pop_current(&popped);
    }
  }
  }
  if (stuck)
    Recorder::instance().note("rewrite: pin: a staging pool could not be given back before its context went; "
                              "its buffers stay mapped");
}
void staging_context_gone(CUcontext gone) {
  State& s = state();
  if (!gone || !s.ready.load(std::memory_order_acquire)) return;
  const Driver* drv = driver_calls();
  if (!drv) return;
  InternalScope internal;
  // The slots are taken out under the lock (marked going: found by no copy,
  // reused by no context), and waited for outside it, so that another
  // context's first large allocation or copy never waits behind this one.
  const auto going = reinterpret_cast<CUcontext>(uintptr_t{2});
  ContextPool* mine[kMaxContexts];
  size_t n = 0;
  {
    std::lock_guard<RankedMutex> lock(s.pools_mutex);
    for (ContextPool& p : s.pools) {
      CUcontext expected = gone;
      if (!p.ctx.compare_exchange_strong(expected, going, std::memory_order_seq_cst)) continue;
      if (!p.whole.exchange(true)) s.partial_pools.fetch_sub(1, std::memory_order_acq_rel);
      mine[n++] = &p;
    }
  }
  bool stuck = false;
  for (size_t i = 0; i < n; ++i) {
    ContextPool& p = *mine[i];
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (p.users.load(std::memory_order_seq_cst) != 0 && std::chrono::steady_clock::now() < until) sched_yield();
    // The filler still has the dead context bound: it stops and pops it (a
    // thread's binding of a destroyed context stays valid to leave; binding
    // its handle anew is what the driver cannot take; a buffer it was making
    // fails with the context).
    p.pool.stop_filling();
    const bool idle = p.pool.wait_filled(std::chrono::seconds(2)) && p.users.load(std::memory_order_acquire) == 0;
    if (idle) p.pool.free_all(*drv, /*context_alive=*/false);
    std::lock_guard<RankedMutex> lock(s.pools_mutex);
    // Stuck: never reused, its buffers stay mapped.
    p.ctx.store(idle ? nullptr : reinterpret_cast<CUcontext>(uintptr_t{1}), std::memory_order_release);
    stuck = stuck || !idle;
  }
  if (stuck)
    Recorder::instance().note("rewrite: pin: a staging pool of a context that went could not be given back; "
                              "its buffers stay mapped");
}

void staging_prewarm(Prewarm how) {
  State& s = state();
  if (s.disabled.load(std::memory_order_relaxed)) return;
  // On every copy that may need staging: one load once every pool has its
  // whole budget. A context made later gets its pool from its first large
  // device allocation or its first staged copy.
  if (how == Prewarm::Whole && s.any_pool.load(std::memory_order_acquire) &&
      s.partial_pools.load(std::memory_order_acquire) == 0)
    return;
  const Driver* drv = driver_calls();
  if (!drv) return;
  InternalScope internal;
  CUcontext ctx = nullptr;
  if (drv->ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) return;
  if (ContextPool* p = find_pool(s, ctx)) {
    if (how == Prewarm::Whole && !p->whole.load(std::memory_order_acquire) && !p->whole.exchange(true)) {
      s.partial_pools.fetch_sub(1, std::memory_order_acq_rel);
      p->pool.want_all();
    }
    return;
  }
  if (!initialise()) return;
  pool_for(s, ctx, how == Prewarm::OneCopy ? kRingPerCall : SIZE_MAX);
}
void disable_after_fork() {
  state().off_reason.store(trace::PassthroughReason::ForkChild, std::memory_order_relaxed);
  state().disabled.store(true, std::memory_order_relaxed);
}

trace::PassthroughReason off_reason() {
  const trace::PassthroughReason r = state().off_reason.load(std::memory_order_relaxed);
  return r == trace::PassthroughReason::None ? trace::PassthroughReason::RewriteDisabled : r;
}

void make_state_before_fork() { state(); }

trace::PassthroughReason try_stage(const CallDesc& desc, int& result, bool any_size) {
  using Why = trace::PassthroughReason;
  const Config& c = config();
  if (desc.kind != trace::EventKind::Copy) return Why::NotHostDevice;
  if (desc.bytes == 0) return Why::Empty;
  if (!any_size && desc.bytes < std::min(c.stage_min_h2d, c.stage_min_d2h)) return Why::BelowThreshold;
  if (desc.src_preset == trace::MemKind::Array || desc.dst_preset == trace::MemKind::Array)
    return Why::NotOneDimensional;
  ThreadState& ts = thread_state();
  if (ts.internal) return Why::NotHostDevice;  // the shim's own call: never recorded
  // Only pageable host memory on one side and device memory on the other.
  PointerInfo src = classify_pointer(desc.src), dst = classify_pointer(desc.dst);
  Way way;
  if (src.kind == trace::MemKind::Pageable && dst.kind == trace::MemKind::Device) way = Way::HtoD;
  else if (src.kind == trace::MemKind::Device && dst.kind == trace::MemKind::Pageable) way = Way::DtoH;
  else if (src.kind == trace::MemKind::Device || dst.kind == trace::MemKind::Device) return Why::NotPageable;
  else return Why::NotHostDevice;
  if (!any_size && desc.bytes < (way == Way::HtoD ? c.stage_min_h2d : c.stage_min_d2h)) return Why::BelowThreshold;
  if (desc.direction != trace::Direction::Unknown &&
      desc.direction != (way == Way::HtoD ? trace::Direction::HtoD : trace::Direction::DtoH))
    return Why::NotHostDevice;

  State& s = state();
  ++ts.internal;  // our own driver calls below are not the app's
  struct Leave {
    ThreadState& ts;
    ~Leave() { --ts.internal; }
  } leave{ts};
  const Driver* drv = driver_calls();
  if (!drv) {
    // Not for good: driver_calls() looks again (the driver may still be
    // loading); this copy is the app's own, and it is said once.
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
      Recorder::instance().note("rewrite: pin: driver entry points not found (yet); copies pass through until they are");
    return Why::NoDriver;
  }
  CUcontext ctx = nullptr;
  if (s.drv().ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx) return Why::NoContext;
  if (!initialise()) return off_reason();
  // The calling context's own pool: its events belong to that context.
  ContextPool* found = pool_for(s, ctx, SIZE_MAX);
  // None: every slot is taken, or the pool could not start (then staging is off).
  if (!found) return s.disabled.load(std::memory_order_relaxed) ? off_reason() : Why::NoPool;
  PoolUse use(found, ctx);
  if (!use) return Why::PoolGoing;  // given back meanwhile: its context is going
  Pool& pool = use.pool();
  const bool per_thread = desc.flags & trace::kFlagPerThreadStream;
  const bool async = desc.flags & trace::kFlagAsync;
  CUstream stream = reinterpret_cast<CUstream>(desc.stream);
  if (s.drv().capturing(per_thread, stream)) return Why::StreamCapturing;

  Buffer* ring[kRingPerCall];
  size_t want = std::min(kRingPerCall, (desc.bytes + chunk_for(desc.bytes) - 1) / chunk_for(desc.bytes));
  size_t k = pool.acquire(s.drv(), ring, want);
  // Only while the pool is still being made (staging_prewarm() usually
  // started it before the first copy that needs it): wait for a buffer (made,
  // or given back by another call) rather than send the copy down the driver's
  // slow path, as callers waited when the pool was made inside the first
  // staged copy. Once the pool is complete, a call that finds none free
  // declines at once, as before.
  if (k == 0 && pool.growing()) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (pool.wait_buffer(until) && (k = pool.acquire(s.drv(), ring, want)) == 0) {
    }
    if (k == 0) k = pool.acquire(s.drv(), ring, want);
  }
  if (k == 0) return Why::NoFreeBuffer;
  CUresult r = CUDA_SUCCESS;
  bool done = way == Way::HtoD
                  ? run_htod(s, per_thread, async, desc.dst, reinterpret_cast<const char*>(desc.src), desc.bytes,
                             stream, ring, k, r)
                  : run_dtoh(s, per_thread, desc.src, reinterpret_cast<char*>(desc.dst), desc.bytes, stream, ring,
                             k, r);
  // H2D buffers may still be in flight (async); their events say when they
  // are free. So may D2H buffers after a failure: a DMA queued behind the
  // one that failed was never waited for.
  pool.release(ring, k, way == Way::HtoD || !done || r != CUDA_SUCCESS);
  if (!done) return Why::StagingFailed;
  result = static_cast<int>(r);
  return Why::None;
}

}  // namespace cuxfer::shim::rewrite
