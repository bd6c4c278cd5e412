#include "rewrite/background_registrar.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

#include "core/quiet_thread.h"
#include "core/ranked_lock.h"
#include "record/recorder.h"
#include "rewrite/driver_calls.h"

namespace cuxfer::shim::rewrite {
namespace {

struct Request {
  RegistrationCache::Reservation reservation;
  CUcontext ctx = nullptr;
  CompleteFn complete = nullptr;
};

constexpr uint32_t kQueue = 32;

struct Registrar {
  RankedMutex mutex{LockRank::kBackgroundRegistrar};
  std::condition_variable work;  // a request was queued
  std::condition_variable idle;  // the queue emptied and nothing is in progress
  Request queue[kQueue];
  uint32_t head = 0, size = 0;
  bool busy = false;     // the thread is completing a request
  bool started = false;  // under mutex
  bool failed = false;   // the thread could not be started: never again
  std::atomic<uint64_t> done{0};
};

// Made at first use and never destroyed (used until the last hook). A forked
// child gets a new one (registrar_after_fork_child).
std::atomic<Registrar*> g_registrar{nullptr};

Registrar& registrar() {
  Registrar* r = g_registrar.load(std::memory_order_acquire);
  if (r) return *r;
  auto* made = new Registrar;
  if (g_registrar.compare_exchange_strong(r, made, std::memory_order_acq_rel)) return *made;
  delete made;  // another thread made it first
  return *r;
}

void run(Registrar& r) {
  const DriverCalls* d = driver_calls();
  InternalScope internal;  // nothing this thread does is the app's
  if (d && d->exchange_capture_mode) {
    // The shim's own registrations: in relaxed capture mode for the
    // thread's life, as the staging pool's filler (driver_calls.h).
    CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
    d->exchange_capture_mode(&relaxed);
  }
  for (;;) {
    Request q;
    {
      RankedUniqueLock lock(r.mutex);
      r.busy = false;
      if (r.size == 0) r.idle.notify_all();
      r.work.wait(lock.get(), [&] { return r.size != 0; });
      q = r.queue[r.head];
      r.head = (r.head + 1) % kQueue;
      --r.size;
      r.busy = true;
    }
    bool pushed = false;
    if (d && q.ctx) pushed = d->ctx_push_current(q.ctx) == CUDA_SUCCESS;
    q.complete(q.reservation);  // a failed push fails the driver call: the entry is removed
    if (pushed) {
      CUcontext popped = nullptr;
      d->ctx_pop_current(&popped);
    }
    r.done.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

namespace {
// Starts the thread (the caller set `started`); false when it could not be,
// and then never again: requests are taken back and completed by their callers.
bool spawn(Registrar& r) {
  if (spawn_quiet_thread([&r] { run(r); })) return true;
  {
    std::lock_guard<RankedMutex> lock(r.mutex);
    r.failed = true;
    r.size = 0;
  }
  Recorder::instance().note("rewrite: pin: the background registration thread could not be started; "
                            "buffers are registered on the copying thread");
  return false;
}
}  // namespace

void start_registrar() {
  Registrar& r = registrar();
  {
    std::lock_guard<RankedMutex> lock(r.mutex);
    if (r.started || r.failed) return;
    r.started = true;
  }
  spawn(r);
}

bool submit_registration(const RegistrationCache::Reservation& res, CUcontext ctx, CompleteFn complete) {
  if (!res.ok || !complete) return false;
  Registrar& r = registrar();
  bool start = false;
  {
    std::lock_guard<RankedMutex> lock(r.mutex);
    if (r.failed || r.size == kQueue) return false;
    if (!r.started) start = r.started = true;
    r.queue[(r.head + r.size) % kQueue] = Request{res, ctx, complete};
    ++r.size;
  }
  if (start && !spawn(r)) return false;  // the request was taken back
  r.work.notify_one();
  return true;
}

void forget_registrar_context(CUcontext gone) {
  if (!gone) return;
  Registrar& r = registrar();
  std::lock_guard<RankedMutex> lock(r.mutex);
  // Completed with no context bound: the registration fails, and the cache
  // lets the range go as for any failed registration.
  for (uint32_t i = 0; i < r.size; ++i) {
    Request& q = r.queue[(r.head + i) % kQueue];
    if (q.ctx == gone) q.ctx = nullptr;
  }
}

bool wait_registrations_idle(uint32_t limit_ms) {
  Registrar& r = registrar();
  RankedUniqueLock lock(r.mutex);
  return r.idle.wait_for(lock.get(), std::chrono::milliseconds(limit_ms), [&] { return r.size == 0 && !r.busy; });
}

void registrar_after_fork_child() {
  // The parent's registrar belongs to its thread, which the child does not
  // have: its mutex may be held by a parent thread that was inside it at the
  // fork, and its queue, `busy` and `started` describe work nobody will do
  // (a wait for it would time out; a request, never run). The child starts
  // with a new one, made on first use; the old one is left as it is.
  g_registrar.store(nullptr, std::memory_order_release);
}

uint64_t background_registrations() { return registrar().done.load(std::memory_order_relaxed); }

}  // namespace cuxfer::shim::rewrite
