#include "rewrite/zero_copy.h"
#include "core/export.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <time.h>

#include "core/bounded_lock.h"
#include "core/config.h"
#include "core/ranked_lock.h"
#include "symbols/symbol_table.h"
#include "memory/allocation_table.h"
#include "memory/pointer_classifier.h"
#include "record/recorder.h"
#include "rewrite/driver_calls.h"
#include "rewrite/gone_contexts.h"
#include "rewrite/site_policy.h"

namespace cuxfer::shim::rewrite {

namespace detail {
std::atomic<uint32_t> g_zero_copy_buffers{0};
}

namespace {

struct Buffer {
  uint64_t device = 0;  // the pointer the app holds
  uint64_t host = 0;    // the same memory's host address
  uint64_t bytes = 0;
  int ordinal = -1;
  CUcontext ctx = nullptr;  // current when it was made: the driver frees it with that context
  // zero_copy_free() is at it: no longer the app's, kept here until the free
  // is done so that a context going meanwhile sees it (orphaned: the context
  // went, the driver freed it, the free makes no driver call).
  bool freeing = false;
  bool orphaned = false;
};

// Few buffers (the policy names small, hot ones): a vector under a mutex.
struct Table {
  RankedMutex mutex{LockRank::kZeroCopyBuffers};
  std::vector<Buffer> buffers;
  uint64_t bytes = 0, made = 0;
};

Table& table() {
  static auto* t = new Table;  // hooks may run during exit
  return *t;
}

// The buffer holding all of [p, p+n), if any.
bool find(uint64_t p, uint64_t n, Buffer& out) {
  Table& t = table();
  std::lock_guard<RankedMutex> lock(t.mutex);
  for (const Buffer& b : t.buffers)
    if (!b.freeing && p >= b.device && p - b.device < b.bytes) {
      if (n > b.bytes - (p - b.device)) return false;  // runs past the end: not ours to handle
      out = b;
      return true;
    }
  return false;
}

// `warning`: a problem (a fallback); else what the policy set up.
void note_once(std::atomic<bool>& said, const std::string& msg, bool warning = true) {
  if (!said.exchange(true)) Recorder::instance().note(msg, warning);
}

int8_t current_ordinal(const DriverCalls&) { return current_device_ordinal(); }

// The contexts that went (zero_copy_teardown, zero_copy_context_gone): a
// thread's event of one of them is freed memory in the driver, dropped
// untouched; a thread whose context lives keeps its event.
GoneContexts& gone_contexts() {
  static auto* g = new GoneContexts;  // hooks may run during exit
  return *g;
}

// An event of the current context for this thread, to wait in stream order.
// One per thread: made in the thread's context at its first wait there, kept
// while that context lives, destroyed when the thread waits in another one.
// Dropped without a driver call when its context went since the thread last
// looked (the driver freed it with its context; a new context may have the
// old one's address, so the generations decide). A thread that fell more
// than GoneContexts::kSlots teardowns behind cannot tell, and drops its event
// too: if its context still lives, that one event leaks (at most one per
// kSlots teardowns per thread, never one per teardown).
//
// The destroy of the old event is decided and made in one step with respect
// to teardowns (GoneContexts::destroy_unless_gone): another thread may be
// destroying or resetting that context at this very moment, and a check
// followed by the call would let the context go in between (a use after free
// in the driver). Teardowns publish before they call the driver, so the
// destroy either returns before the context goes or is not made.
// A primary context's release, the last only if no reference is left, is
// known as the last only once the context is gone (published after): while
// it is under way the context counts as going, and its events are left alone.
// Not covered: a thread still copying in its context while another thread
// destroys that context (the app's own race: without the shim its copy gets
// CUDA_ERROR_CONTEXT_IS_DESTROYED or runs first).
// The caller is inside an InternalScope and holds no shim lock; `nested`: it
// was inside one already (an app's callback inside the shim's own driver
// call), and may not wait for the teardowns' lock.
CUevent thread_event(const DriverCalls& d, bool nested) {
  thread_local CUcontext ctx = nullptr;  // the event's
  thread_local CUevent event = nullptr;
  thread_local uint64_t seen = 0;  // the generation of contexts gone when this thread last looked
  CUcontext now = nullptr;
  if (d.ctx_get_current(&now) != CUDA_SUCCESS || !now) return nullptr;
  GoneContexts& gone = gone_contexts();
  const uint64_t upto = gone.generation();
  if (upto != seen) {
    // Its context went (or maybe did): the driver freed it, not ours to destroy.
    if (event && gone.went(ctx, seen, upto) != GoneContexts::Since::Alive) event = nullptr;
    seen = upto;
  }
  if (now != ctx || !event) {
    // Another context's, live when seen above: ours to destroy unless it went
    // since. `seen` stays: a publication meanwhile may be of `now`, and the
    // event made below is then dropped at the next look.
    if (event && d.event_destroy) gone.destroy_unless_gone(ctx, seen, nested, [&] { d.event_destroy(event); });
    event = nullptr;
    if (d.event_create(&event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return event = nullptr;
    ctx = now;
  }
  return event;
}

// The app's blocking streams (created without CU_STREAM_NON_BLOCKING): the
// legacy stream waits for their work. Beyond kMaxStreams the shortcut is off.
struct Streams {
  static constexpr size_t kMaxStreams = 64;
  RankedMutex mutex{LockRank::kZeroCopyStreams};
  CUstream list[kMaxStreams] = {};
  size_t count = 0;
  bool overflow = false;
};
Streams& streams() {
  static auto* s = new Streams;
  return *s;
}
std::atomic<bool> g_per_thread_used{false};

// Nothing a synchronous legacy-stream copy would wait for is pending.
bool legacy_order_idle(const DriverCalls& d) {
  if (g_per_thread_used.load(std::memory_order_relaxed) || !d.stream_query) return false;
  if (d.stream_query(CU_STREAM_LEGACY) != CUDA_SUCCESS) return false;
  Streams& s = streams();
  std::lock_guard<RankedMutex> lock(s.mutex);
  if (s.overflow) return false;
  for (size_t i = 0; i < s.count; ++i)
    if (d.stream_query(s.list[i]) != CUDA_SUCCESS) return false;  // busy, or another context's: wait
  return true;
}

bool host_memory(trace::MemKind k) {
  return k == trace::MemKind::Pageable || k == trace::MemKind::Pinned || k == trace::MemKind::Registered;
}

}  // namespace

void blocking_stream_created(CUstream st) {
  Streams& s = streams();
  std::lock_guard<RankedMutex> lock(s.mutex);
  if (s.count == Streams::kMaxStreams) s.overflow = true;
  else s.list[s.count++] = st;
}

void stream_destroyed(CUstream st) {
  Streams& s = streams();
  std::lock_guard<RankedMutex> lock(s.mutex);
  for (size_t i = 0; i < s.count; ++i)
    if (s.list[i] == st) {
      s.list[i] = s.list[--s.count];
      return;
    }
}

CUXFER_HOT void per_thread_stream_used() {
  if (!g_per_thread_used.load(std::memory_order_relaxed)) g_per_thread_used.store(true, std::memory_order_relaxed);
}

bool zero_copy_alloc(uint64_t bytes, uint64_t* out) {
  if (bytes == 0 || config().policy_path.empty()) return false;
  SiteDecision d = site_decision(policy::SiteKind::Allocation, bytes);
  if (!d.matched || d.path != policy::Path::ZeroCopy) return false;
  const DriverCalls* drv = driver_calls();
  static std::atomic<bool> said_missing{false}, said_budget{false}, said_failed{false}, said_first{false};
  if (!drv || !drv->host_get_device_pointer || !drv->free_host || !drv->ctx_synchronize) {
    note_once(said_missing, "policy: zero_copy: driver entry points missing; allocations stay on the device");
    return false;
  }
  Table& t = table();
  const uint64_t budget = pinned_budget_bytes(config());
  {
    std::lock_guard<RankedMutex> lock(t.mutex);
    if (t.bytes + bytes > budget) {
      note_once(said_budget, "policy: zero_copy: pinned budget (" + std::to_string(budget) +
                                 " bytes) reached; further allocations stay on the device");
      return false;
    }
  }
  InternalScope internal;
  void* host = nullptr;
  CUresult r = drv->host_alloc(&host, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  CUdeviceptr device = 0;
  if (r == CUDA_SUCCESS) r = drv->host_get_device_pointer(&device, host, 0);
  if (r != CUDA_SUCCESS) {
    if (host) drv->free_host(host);
    note_once(said_failed, "policy: zero_copy: mapped allocation failed (CUresult " + std::to_string(r) +
                               "); allocations stay on the device");
    return false;
  }
  const int8_t ordinal = current_ordinal(*drv);
  CUcontext ctx = nullptr;
  if (drv->ctx_get_current(&ctx) != CUDA_SUCCESS) ctx = nullptr;
  {
    std::lock_guard<RankedMutex> lock(t.mutex);
    t.buffers.push_back({device, reinterpret_cast<uint64_t>(host), bytes, ordinal, ctx});
    t.bytes += bytes;
    ++t.made;
  }
  allocation_table().insert(device, bytes, trace::MemKind::Mapped, ordinal);
  detail::g_zero_copy_buffers.fetch_add(1, std::memory_order_relaxed);
  thread_state().mapped = true;
  note_once(said_first, "policy: zero_copy: device allocations named by the policy are mapped host memory", false);
  *out = device;
  return true;
}

void zero_copy_teardown(CUcontext going) {
  // Threads' events may be the going context's: a thread whose event it is
  // drops it at its next wait, from now on rather than after the driver freed
  // it (a thread that moved to another context would otherwise destroy a dead
  // event). Null: a primary context whose handle the shim never saw; every
  // thread's event may be of it. Then nothing of it is bound until the
  // teardown is done, and frees of its buffers in progress are waited for.
  GoneContexts& gone = gone_contexts();
  gone.publish(going);
  gone.going(going);
  if (!going || !zero_copy_exists()) return;
  std::vector<Buffer> mine;
  Table& t = table();
  {
    std::lock_guard<RankedMutex> lock(t.mutex);
    for (auto it = t.buffers.begin(); it != t.buffers.end();) {
      // Another context's (another thread may be copying into it now), or
      // one a free waits to finish (it does once the teardown is done).
      if (it->ctx != going || it->freeing) {
        ++it;
        continue;
      }
      t.bytes -= it->bytes;
      mine.push_back(*it);
      it = t.buffers.erase(it);
    }
  }
  if (mine.empty()) return;
  detail::g_zero_copy_buffers.fetch_sub(static_cast<uint32_t>(mine.size()), std::memory_order_relaxed);
  for (const Buffer& b : mine) allocation_table().erase(b.device);
  const DriverCalls* drv = driver_calls();
  if (!drv) return;
  // Freed while the context exists, after its work (the app's pointers to
  // them are invalid after, like its device memory). The going context need
  // not be the current one (cuCtxDestroy of another): its work is waited for,
  // and its memory freed, with it current (cuCtxSynchronize waits for the
  // current context's work only). Where it cannot be made current, its work
  // cannot be waited for: its buffers are left to the driver, which frees
  // them with the context after its work, rather than freed while a kernel
  // may still use them.
  if (drv->ctx_push_current(going) != CUDA_SUCCESS) {
    static std::atomic<bool> said{false};
    note_once(said,
              "policy: zero_copy: a context going could not be made current; its mapped buffers are "
              "left to the driver");
    return;
  }
  drv->ctx_synchronize();
  for (const Buffer& b : mine) drv->free_host(reinterpret_cast<void*>(b.host));
  CUcontext popped = nullptr;
  drv->ctx_pop_current(&popped);
}

void zero_copy_teardown_done(CUcontext going) { gone_contexts().done_going(going); }

void zero_copy_release_begins(CUcontext primary) {
  // No publication: a release that is not the last leaves the context, and
  // the threads' events and buffers of it, alive. A last one publishes once
  // it is known (zero_copy_context_gone: the driver freed its buffers).
  gone_contexts().going(primary);
}

void zero_copy_green_destroy_begins(CUcontext converted) {
  if (!converted) return;
  // The driver frees the context's events with it: published before, as a
  // teardown's are, and going (a free's push of it waits) until after.
  GoneContexts& gone = gone_contexts();
  gone.publish(converted);
  gone.going(converted);
}

uint64_t zero_copy_devices_of(CUcontext ctx) {
  if (!ctx || !zero_copy_exists()) return 0;
  uint64_t devices = 0;
  Table& t = table();
  std::lock_guard<RankedMutex> lock(t.mutex);
  for (const Buffer& b : t.buffers)
    if (b.ctx == ctx) devices |= b.ordinal >= 0 && b.ordinal < 64 ? uint64_t{1} << b.ordinal : uint64_t{1} << 63;
  return devices;
}

void zero_copy_green_destroy_done(CUcontext converted, const CUcontext* primaries) {
  if (!converted) return;
  GoneContexts& gone = gone_contexts();
  if (primaries && zero_copy_exists()) {
    // Handed over before the context stops going: a free that waited for it
    // then finds the buffer's new context, never the destroyed one. The
    // primary contexts are held by the caller meanwhile: their handles are
    // alive, and a last release after this sweeps the buffers as its own.
    uint32_t unheld = 0;
    Table& t = table();
    {
      std::lock_guard<RankedMutex> lock(t.mutex);
      for (Buffer& b : t.buffers) {
        if (b.ctx != converted) continue;
        const CUcontext primary = b.ordinal >= 0 && b.ordinal < 63 ? primaries[b.ordinal] : nullptr;
        // No primary context could be held for it (a failed retain, a device
        // past 62): of no known context, freed with whichever is current (it
        // is portable), and not swept by its primary context's end.
        if (!primary) ++unheld;
        b.ctx = primary;
      }
    }
    if (unheld) {
      static std::atomic<bool> said{false};
      note_once(said, "policy: zero_copy: mapped buffers of a destroyed green context whose device's primary context "
                      "could not be held belong to no known context from then on");
    }
  }
  // A second generation after a destroy, as cuCtxDestroy's: a thread that
  // made an event in the context while it was going drops that one too.
  if (primaries) gone.publish(converted);
  gone.done_going(converted);
}

void zero_copy_context_gone(CUcontext gone) {
  if (!gone) return;
  // A primary context's last release had no publication before; after a
  // destroy or reset this is its second generation: a thread that made an
  // event in it after the teardown's drops that one too.
  gone_contexts().publish(gone);
  if (!zero_copy_exists()) return;
  uint32_t n = 0;
  Table& t = table();
  {
    std::lock_guard<RankedMutex> lock(t.mutex);
    for (auto it = t.buffers.begin(); it != t.buffers.end();) {
      if (it->ctx != gone) {
        ++it;
        continue;
      }
      if (it->freeing) {  // zero_copy_free() forgets it, without a driver call
        it->orphaned = true;
        ++it;
        continue;
      }
      allocation_table().erase(it->device);  // the driver freed it with its context
      t.bytes -= it->bytes;
      it = t.buffers.erase(it);
      ++n;
    }
  }
  detail::g_zero_copy_buffers.fetch_sub(n, std::memory_order_relaxed);
}

namespace {

// The buffer zero_copy_free() is at leaves the table; whether its context
// went meanwhile (the driver freed it with the context).
bool forget_freeing(uint64_t p) {
  Table& t = table();
  std::lock_guard<RankedMutex> lock(t.mutex);
  for (auto it = t.buffers.begin(); it != t.buffers.end(); ++it)
    if (it->freeing && it->device == p) {
      const bool orphaned = it->orphaned;
      t.bytes -= it->bytes;
      t.buffers.erase(it);
      return orphaned;
    }
  return true;  // not found: never happens (only zero_copy_free erases a freeing buffer)
}

// Waits for `b`'s context's work and frees it (pushing that context where
// it is not the current one). False: the context could not be made current.
bool free_mapped(const DriverCalls& drv, const Buffer& b) {
  CUcontext current = nullptr;
  const bool other = b.ctx && (drv.ctx_get_current(&current) != CUDA_SUCCESS || current != b.ctx);
  if (other && drv.ctx_push_current(b.ctx) != CUDA_SUCCESS) return false;
  drv.ctx_synchronize();
  drv.free_host(reinterpret_cast<void*>(b.host));
  if (other) {
    CUcontext popped = nullptr;
    drv.ctx_pop_current(&popped);
  }
  return true;
}

// The context of the buffer zero_copy_free() is at, in `ctx`. False: its
// context went (orphaned: the driver freed it).
bool freeing_context(uint64_t p, CUcontext& ctx) {
  Table& t = table();
  std::lock_guard<RankedMutex> lock(t.mutex);
  for (const Buffer& b : t.buffers)
    if (b.freeing && b.device == p) {
      ctx = b.ctx;
      return !b.orphaned;
    }
  return false;
}

}  // namespace

bool zero_copy_free(uint64_t p) {
  Buffer b;
  Table& t = table();
  {
    std::lock_guard<RankedMutex> lock(t.mutex);
    auto it = t.buffers.begin();
    while (it != t.buffers.end() && (it->device != p || it->freeing)) ++it;
    if (it == t.buffers.end()) return false;
    it->freeing = true;
    b = *it;
  }
  allocation_table().erase(p);
  const DriverCalls* drv = driver_calls();
  const bool nested = thread_state().internal;
  InternalScope internal;
  // Kernels may still use it: cudaFree waits for the device too. The work to
  // wait for is of the buffer's own context, which need not be the current
  // one (cuMemFree of another context's memory), and cuCtxSynchronize waits
  // for the current context's only: the buffer's is made current for it.
  // That context is pinned meanwhile: another thread may be tearing it down
  // (pushing it after its destroy is a use after free in the driver). While
  // a teardown of it is under way the free waits for its end: the context
  // went (its buffer orphaned: the driver freed it) or stays (freed here).
  // A free nested in the shim's own driver call cannot wait: its buffer is
  // left to the driver.
  bool left = !drv;
  GoneContexts& gone = gone_contexts();
  // A green context's destroy hands its buffers over to the primary context
  // while it is going: the context is read again once pinned, and a buffer
  // handed over meanwhile is pinned anew under its new one.
  while (drv) {
    CUcontext ctx = nullptr;
    if (!freeing_context(p, ctx)) break;  // its context went: the driver freed it
    const GoneContexts::Pin pin = gone.pin(ctx, nested);
    if (pin == GoneContexts::Pin::Pinned) {
      CUcontext now = nullptr;
      const bool live = freeing_context(p, now);
      if (live && now != ctx) {
        gone.unpin(ctx);
        continue;
      }
      b.ctx = ctx;
      if (live) left = !free_mapped(*drv, b);
      gone.unpin(ctx);
      break;
    }
    if (nested) {
      left = true;
      break;
    }
    struct timespec pause {0, 100'000};
    nanosleep(&pause, nullptr);
  }
  forget_freeing(p);
  detail::g_zero_copy_buffers.fetch_sub(1, std::memory_order_relaxed);
  if (left) {
    static std::atomic<bool> said{false};
    note_once(said,
              "policy: zero_copy: a mapped buffer's context could not be made current to free it; it is left "
              "to the driver until its context goes");
  }
  return true;
}

Action try_zero_copy(const CallDesc& d, int& result) {
  if (d.kind != trace::EventKind::Copy || d.bytes == 0) return Action::Original;
  if (d.src_preset == trace::MemKind::Array || d.dst_preset == trace::MemKind::Array) return Action::Original;
  Buffer zdst, zsrc;
  const bool to = find(d.dst, d.bytes, zdst), from = find(d.src, d.bytes, zsrc);
  if (to == from) return Action::Original;  // neither, or both (a device-to-device copy)
  if (!host_memory(classify_pointer(to ? d.src : d.dst).kind)) return Action::Original;
  const trace::Direction want = to ? trace::Direction::HtoD : trace::Direction::DtoH;
  if (d.direction != trace::Direction::Unknown && d.direction != want) return Action::Original;
  const DriverCalls* drv = driver_calls();
  if (!drv) return Action::Original;
  const bool nested = thread_state().internal;
  const bool async = d.flags & trace::kFlagAsync;
  const bool per_thread = d.flags & trace::kFlagPerThreadStream;
  InternalScope internal;
  // Its queries, event and wait are the shim's own: in relaxed capture mode,
  // so that a graph another thread captures in global mode is not
  // invalidated by them (driver_calls.h).
  RelaxedCaptureScope capture_safe(*drv);
  if (!async) {
    // What the driver does first for a pageable copy: wait for the work ahead
    // of it in the default stream (and, as the legacy stream does, in the
    // blocking streams).
    if (per_thread) per_thread_stream_used();
    if (per_thread || !legacy_order_idle(*drv)) {
      CUevent ev = thread_event(*drv, nested);
      if (!ev || drv->record(per_thread, ev, nullptr) != CUDA_SUCCESS || drv->event_synchronize(ev) != CUDA_SUCCESS)
        return Action::Original;
    }
  } else {
    const uint64_t s = d.stream;
    // The default streams order against other streams: leave them to the driver.
    if (s == 0 || s == reinterpret_cast<uint64_t>(CU_STREAM_LEGACY) ||
        s == reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD))
      return Action::Original;
    const CUstream stream = reinterpret_cast<CUstream>(s);
    if (!drv->idle(per_thread, stream)) return Action::Original;  // pending work or capture
    // A blocking stream's copy also waits for the legacy default stream: a
    // kernel still writing the buffer there must finish before the host
    // reads or writes it, or the result is silently wrong.
    if (drv->orders_after_legacy(stream) && !drv->idle(false, CU_STREAM_LEGACY)) return Action::Original;
  }
  void* dst = to ? reinterpret_cast<void*>(zdst.host + (d.dst - zdst.device)) : reinterpret_cast<void*>(d.dst);
  const void* src = from ? reinterpret_cast<const void*>(zsrc.host + (d.src - zsrc.device))
                         : reinterpret_cast<const void*>(d.src);
  std::memcpy(dst, src, d.bytes);
  // Stores before the launches that follow (which reach the GPU by MMIO, ordered after them).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // No DMA ran: CUPTI has no record to match this call.
  thread_state().pending.flags &= static_cast<uint8_t>(~trace::kFlagGpuExpected);
  result = CUDA_SUCCESS;
  return Action::Done;
}

void zero_copy_before_fork() {
  if (!config().rewrite_any()) return;
  gone_contexts();
  table();
  streams();
}

void zero_copy_after_fork_child() {
  if (!config().rewrite_any()) return;
  gone_contexts().after_fork_child();
  // A parent thread may have held these locks, or been changing the table,
  // when it forked: the locks are made anew and the contents dropped (their
  // storage leaked, never freed half-changed). The child has no CUDA of the
  // parent's: its buffers, streams and events are not its own.
  Table& t = table();
  remake_in_fork_child(t.mutex);
  new (&t.buffers) std::vector<Buffer>();
  t.bytes = 0;
  detail::g_zero_copy_buffers.store(0, std::memory_order_relaxed);
  Streams& st = streams();
  remake_in_fork_child(st.mutex);
  st.count = 0;
  st.overflow = false;
}

bool zero_copy_attribute(CUpointer_attribute attribute, void* data, CUdeviceptr p, CUresult& result) {
  if (!zero_copy_exists() || !data) return false;
  Buffer b;
  if (!find(p, 1, b)) return false;
  result = CUDA_SUCCESS;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
      return true;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = p;
      return true;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      *static_cast<void**>(data) = nullptr;  // device memory has no host address
      result = CUDA_ERROR_INVALID_VALUE;
      return true;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = b.device;
      return true;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = b.bytes;
      return true;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      if (b.ordinal < 0) return false;
      *static_cast<int*>(data) = b.ordinal;
      return true;
    default:
      return false;  // the driver's answer for the mapped memory
  }
}

}  // namespace cuxfer::shim::rewrite
