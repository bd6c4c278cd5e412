#include "rewrite/pinned_rewrite.h"

#include "rewrite/background_registrar.h"
#include "rewrite/site_policy.h"
#include "rewrite/zero_copy.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "core/clock.h"
#include "core/config.h"
#include "core/event_clock.h"
#include "core/log.h"
#include "symbols/symbol_table.h"
#include "memory/host_ranges.h"
#include "memory/pointer_classifier.h"
#include "record/recorder.h"
#include "rewrite/copy_decision.h"
#include "rewrite/driver_calls.h"
#include "rewrite/registration_cache.h"

namespace cuxfer::shim::rewrite {
namespace {

using trace::MemKind;

std::atomic<bool> g_memhooks{false};

// What happened to registrations, for the summary note at exit.
struct Counters {
  std::atomic<uint64_t> made{0}, made_bytes{0}, made_ns{0}, failed{0};
  std::atomic<uint64_t> app_overlap{0};  // refused: overlaps a registration of the app's
  std::atomic<uint64_t> gone{0};     // dropped because the memory went away
  std::atomic<uint64_t> evicted{0};  // dropped for budget or merged
  std::atomic<uint64_t> released{0}; // dropped so that a call could pass through exactly
};

// cuMemHostRegister/Unregister through the real driver; registrations are
// portable so that every context of the process sees them pinned.
class DriverOps final : public RegistrationOps {
 public:
  int register_range(uint64_t begin, uint64_t bytes) override {
    const DriverCalls* d = driver_calls();
    if (!d) return -1;
    InternalScope internal;
    RelaxedCaptureScope capture_safe(*d);
    CUcontext ctx = nullptr;
    if (d->ctx_get_current(&ctx) == CUDA_SUCCESS && ctx)
      context_.store(ctx);  // the one unregister falls back to: the latest, alive when it registered
    return d->host_register(reinterpret_cast<void*>(begin), bytes, CU_MEMHOSTREGISTER_PORTABLE);
  }
  int unregister_range(uint64_t begin) override {
    const DriverCalls* d = driver_calls();
    if (!d) return -1;
    InternalScope internal;
    // free() may run on a thread with no current context.
    CUcontext current = nullptr;
    bool pushed = false;
    if ((d->ctx_get_current(&current) != CUDA_SUCCESS || !current) && context_.load())
      pushed = d->ctx_push_current(context_.load()) == CUDA_SUCCESS;
    int r;
    {
      RelaxedCaptureScope capture_safe(*d);  // with the context bound
      r = d->host_unregister(reinterpret_cast<void*>(begin));
    }
    if (pushed) {
      CUcontext popped = nullptr;
      d->ctx_pop_current(&popped);
    }
    return r;
  }
  // The allocation table marks the range as the app's pageable memory, so
  // that classification (which would ask the driver and hear "pinned") keeps
  // reporting what the app has. The cache calls these after the register
  // succeeded and after the unregister returned: the entry outlives the
  // registration, so the range reads pageable throughout, also while an
  // invalidated registration waits in the queue.
  void on_registered(uint64_t begin, uint64_t end) override {
    allocation_table().insert(begin, end - begin, MemKind::Pageable, -1);
  }
  void on_unregistered(uint64_t begin, uint64_t) override { allocation_table().erase(begin); }
  // A failed unregister is retried by the cache; one that never succeeded is said.
  void on_unregister_failed(uint64_t begin, uint64_t end, int status, bool given_up) override {
    if (!given_up) return;
    Recorder::instance().note("rewrite: pin: cuMemHostUnregister of " + std::to_string(end - begin) +
                              " bytes failed " + std::to_string(RegistrationCache::kUnregisterTries) +
                              " times (error " + std::to_string(status) +
                              "); the driver may still hold those pages pinned");
  }
  // The shim's cache: drain_pending_registrations() (registration_cache.h) drains it.
  bool process_wide() const override { return true; }
  // `gone` was destroyed: its handle is never bound again (the driver freed it).
  void forget_context(CUcontext gone) { context_.compare_exchange_strong(gone, nullptr); }

 private:
  std::atomic<CUcontext> context_{nullptr};
};

struct State {
  DriverOps ops;
  RegistrationCache cache;
  Counters counters;
  bool registering;  // CUXFER_REGISTER=auto
  State(uint64_t budget, bool on) : cache(ops, budget, &detail::g_registrations), registering(on) {}
};

uint64_t registration_budget(const Config& c) {
  // What the staging pool does not take (rewrite/staging.cpp: half, at most 128 MiB).
  const uint64_t total = pinned_budget_bytes(c);
  return total - std::min<uint64_t>(total / 2, 128ull << 20);
}

State& state() {
  static State* s = [] {
    const Config& c = config();
    const bool hooks = memhooks_attached();
    if (c.enabled && c.rewrite_pin && c.register_in_place && !hooks)
      Recorder::instance().note("rewrite: pin: registration in place needs libcuxfer_memhooks.so preloaded after "
                                "libcuxfer.so (cuxfer record --rewrite=pin does that); copies are only staged");
    return new State(registration_budget(c), c.register_in_place && hooks);  // never destroyed: free() may run late
  }();
  return *s;
}

// The registration's pinning cost, as an event of its own (api "cuxfer:register").
void record_registration(const AddResult& r, uint64_t t0, uint64_t t1) {
  ThreadState& ts = thread_state();
  trace::Event e{};
  e.t_enter_ns = t0;
  e.t_exit_ns = t1;
  e.bytes = r.end - r.begin;
  e.address = r.begin;
  e.thread_id = ts.tid;
  e.api = kRegisterApi;
  e.kind = static_cast<uint8_t>(trace::EventKind::HostRegister);
  e.dst_kind = static_cast<uint8_t>(MemKind::Registered);
  e.device = -1;
  e.result = trace::record_result(r.status);
  if (r.status != 0) e.flags |= trace::kFlagFailed;
  Recorder::instance().emit(ts, e);
}

// Registers the observed range [begin, end) now. True when it is registered.
// What a registration's outcome does to the counters, the host ranges and
// the notes, and its event; from the thread that made it. True when it is
// registered.
bool account_registration(State& s, const AddResult& r, uint64_t begin, uint64_t end, uint64_t t0, uint64_t t1) {
  if (r.doomed) {
    // Pinned, and unpinned again because its memory went away meanwhile
    // (free() on another thread does not wait): the cost was paid, so it is
    // recorded as a registration, and counted as gone.
    AddResult made = r;
    made.status = 0;
    record_registration(made, t0, t1);
    ++s.counters.gone;
    return false;
  }
  if (r.status == -1) return false;  // no room or busy: nothing was attempted
  s.counters.evicted += r.unregistered;
  record_registration(r, t0, t1);
  if (r.status != 0) {
    host_ranges().forbid(begin, end);
    if (r.status == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
      ++s.counters.app_overlap;  // shares a page with the app's own registration: not ours to pin
      return false;
    }
    ++s.counters.failed;
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      Recorder::instance().note("rewrite: pin: cuMemHostRegister of " + std::to_string(r.end - r.begin) +
                                " bytes failed (" + std::to_string(r.status) +
                                "); such buffers are staged instead");
    return false;
  }
  ++s.counters.made;
  s.counters.made_bytes += r.end - r.begin;
  s.counters.made_ns += t1 - t0;
  return true;
}

// Registers the observed range [begin, end) now, on this thread. True when it is registered.
bool register_range(State& s, uint64_t begin, uint64_t end) {
  const uint64_t t0 = event_clock::stamp();  // the event's stamps (core/event_clock.h)
  AddResult r = s.cache.add(begin, end);
  const uint64_t t1 = event_clock::stamp();
  return account_registration(s, r, begin, end, t0, t1);
}

// The driver call for a reservation, on the calling thread (its event names
// it), and its accounting. True when the range is registered. A reservation
// withdrawn meanwhile makes no call and records nothing.
bool complete_reservation(const RegistrationCache::Reservation& res) {
  State& s = state();
  const uint64_t t0 = event_clock::stamp();
  AddResult r = s.cache.complete(res);
  const uint64_t t1 = event_clock::stamp();
  return account_registration(s, r, res.result.begin, res.result.end, t0, t1);
}

// The background registrar's half (background_registrar.h), on its thread.
void complete_in_background(const RegistrationCache::Reservation& res) { complete_reservation(res); }

// Reserves [begin, end) for the background registrar; `later` hands it over
// when the copy hook's call is done (pinned_rewrite.h). A reservation is
// Reserved until then: an invalidation by any thread withdraws it without
// waiting, so holding it across this copy makes nobody wait for the copy.
// False when nothing was reserved (no room, or the range busy).
bool reserve_for_background(State& s, uint64_t begin, uint64_t end, DeferredRegistration& later) {
  const RegistrationCache::Reservation res = s.cache.reserve(begin, end);
  if (!res.ok) return false;
  const DriverCalls* d = driver_calls();
  CUcontext ctx = nullptr;
  if (d) d->ctx_get_current(&ctx);
  later.hold(res, ctx);
  return true;
}

bool host_kind(MemKind k) { return k == MemKind::Pageable || k == MemKind::Pinned || k == MemKind::Registered; }

RewriteSettings settings_for(const Config& c, bool registering) {
  RewriteSettings s;
  s.rewrite_pin = c.rewrite_pin;
  s.registering = registering;
  s.register_in_background = registering && !c.register_inline;
  s.stage_min_h2d = c.stage_min_h2d;
  s.stage_min_d2h = c.stage_min_d2h;
  return s;
}

// The classification step: which way the copy goes, what its host side is,
// and what the shim's registrations say about that range.
void classify(const CallDesc& desc, State* s, CopyFacts& f, uint64_t& host) {
  PointerInfo src = classify_pointer(desc.src), dst = classify_pointer(desc.dst);
  f.way = CopyWay::Other;
  if (host_kind(src.kind) && dst.kind == MemKind::Device) f.way = CopyWay::HtoD;
  else if (src.kind == MemKind::Device && host_kind(dst.kind)) f.way = CopyWay::DtoH;
  if (f.way != CopyWay::Other && desc.direction != trace::Direction::Unknown &&
      desc.direction != (f.way == CopyWay::HtoD ? trace::Direction::HtoD : trace::Direction::DtoH))
    f.way = CopyWay::Other;  // the API names another direction: the driver will say what is wrong
  if (f.way == CopyWay::Other) return;
  host = f.way == CopyWay::HtoD ? desc.src : desc.dst;
  f.host_kind = f.way == CopyWay::HtoD ? src.kind : dst.kind;
  f.cover = f.registrations_exist && s ? s->cache.lookup(host, desc.bytes) : Cover::None;
}

StreamState stream_state(const DriverCalls* d, const CallDesc& desc) {
  if (!d) return StreamState::Capturing;  // nothing can be asked or waited on: act as if captured
  const bool per_thread = desc.flags & trace::kFlagPerThreadStream;
  auto stream = reinterpret_cast<CUstream>(desc.stream);
  InternalScope internal;
  if (d->capturing(per_thread, stream)) return StreamState::Capturing;
  return d->idle(per_thread, stream) ? StreamState::Idle : StreamState::Busy;  // in relaxed mode
}

// Counts the copy toward its observed host range; `range` gets the range's bounds.
ReuseVerdict count_reuse(State& s, uint64_t host, uint64_t bytes, RegisterVerdict& range) {
  range = host_ranges().note_copy(host, bytes, s.cache.budget());
  if (range.register_now) return ReuseVerdict::RegisterNow;
  if (!range.tracked || range.forbidden || range.end - range.begin > s.cache.budget()) return ReuseVerdict::Never;
  return ReuseVerdict::Wait;
}

// A staged copy is the shim's own work on the app's stream (a DMA from a
// buffer of its own, events, waits, the pool made on first use): in relaxed
// capture mode, so that a graph another thread captures in global mode is
// not invalidated by it (driver_calls.h). The app's stream itself is never
// being captured here: the decision passes such calls through.
trace::PassthroughReason stage_capture_safe(const CallDesc& desc, int& result, bool any_size) {
  const DriverCalls* d = driver_calls();
  if (!d) return try_stage(desc, result, any_size);
  RelaxedCaptureScope capture_safe(*d);
  return try_stage(desc, result, any_size);
}

// What the event of the call being made records as the reason it ran as made.
void set_passthrough(ThreadState& ts, trace::PassthroughReason why) {
  ts.pending.passthrough = static_cast<uint8_t>(why);
}

}  // namespace

// The executor: gathers the facts decide() asks for, makes each step happen,
// and runs the path it settles on. At most a handful of rounds (each step is
// taken once); the last decision is what the event records.
bool DeferredRegistration::complete_here() {
  if (!res_.ok) return false;
  res_.ok = false;
  ThreadState& ts = thread_state();
  ++ts.internal;  // the registration's driver calls are the shim's own
  const bool ok = complete_reservation(res_);
  --ts.internal;
  return ok;
}

void DeferredRegistration::hand_over() {
  ThreadState& ts = thread_state();
  ++ts.internal;  // an inline completion's driver calls are the shim's own
  if (!submit_registration(res_, ctx_, complete_in_background)) complete_in_background(res_);
  --ts.internal;
  res_.ok = false;
}

Action try_rewrite(const CallDesc& desc, int& result, DeferredRegistration& later) {
  ThreadState& ts = thread_state();
  if (desc.kind != trace::EventKind::Copy || ts.internal) return Action::Original;
  if (desc.bytes == 0) {
    set_passthrough(ts, trace::PassthroughReason::Empty);
    return Action::Original;
  }
  if (desc.src_preset == MemKind::Array || desc.dst_preset == MemKind::Array) {
    set_passthrough(ts, trace::PassthroughReason::NotOneDimensional);
    return Action::Original;
  }
  const Config& c = config();
  // CUXFER_POOL_GROW=early: the pool grows to its whole budget, in the
  // background, from the first copy that could need it (one load once it is
  // on its way). By default it grows from the first copy staged (below): its
  // pinning, ~40 ms under the driver's lock for 128 MiB, then never shares
  // the driver with the app's first copies that run as made or in place
  // (bandwidthTest's 4 MiB H2D loop).
  if (c.rewrite_pin && c.pool_grow_early && desc.bytes >= std::min({c.stage_min_h2d, c.stage_min_d2h, c.register_min}))
    staging_prewarm();
  // The policy file's word for this call site, if it names it (site_policy.h).
  const SiteDecision site = site_decision(policy::SiteKind::Call, desc.bytes);
  CopyFacts f;
  f.bytes = desc.bytes;
  f.async = desc.flags & trace::kFlagAsync;
  f.registrations_exist = registrations_exist();
  f.global_capture = global_capture_open();
  f.global_capture_seen = global_capture_seen();
  if (f.global_capture || (f.global_capture_seen && f.async)) copy_left_beside_capture();
  f.site_matched = site.matched;
  f.site_path = site.path;
  State* s = f.registrations_exist || c.register_in_place ? &state() : nullptr;
  const RewriteSettings settings = settings_for(c, s && s->registering);
  const DriverCalls* d = nullptr;
  uint64_t host = 0;
  uint64_t reg_begin = 0, reg_end = 0;
  for (int round = 0; round < 8; ++round) {
    const CopyDecision k = decide(f, settings);
    if (k.need_classify) {
      classify(desc, s, f, host);
      continue;
    }
    if (k.need_stream) {
      if (!d) d = driver_calls();
      f.stream = stream_state(d, desc);
      continue;
    }
    if (k.count_reuse) {
      if (!d) d = driver_calls();
      RegisterVerdict range;
      f.reuse = s && d ? count_reuse(*s, host, desc.bytes, range) : ReuseVerdict::Never;
      reg_begin = range.begin;
      reg_end = range.end;
      continue;
    }
    if (k.before == Before::RegisterInBackground) {
      ++ts.internal;
      // One reservation per call (one withdrawn at once is not made again).
      const bool queued =
          s && reg_end > reg_begin && !later.holding() && reserve_for_background(*s, reg_begin, reg_end, later);
      --ts.internal;
      if (!queued) {
        f.registration_failed = true;
        continue;
      }
      f.registrations_exist = true;
      f.reserved_here = true;
      f.cover = s->cache.lookup(host, desc.bytes);  // Touches while it is being registered
      // On to this copy's own path (below); if the staging path declines it,
      // the next decision sees the range being registered.
    }
    if (k.before == Before::RegisterReserved) {
      const bool ok = later.complete_here();
      f.reserved_here = false;
      f.cover = s->cache.lookup(host, desc.bytes);
      f.registration_failed = !ok || f.cover != Cover::Covers;
      continue;
    }
    if (k.before == Before::Register) {
      ++ts.internal;
      const bool ok = s && reg_end > reg_begin && register_range(*s, reg_begin, reg_end);
      --ts.internal;
      if (ok) f.cover = s->cache.lookup(host, desc.bytes);
      f.registrations_exist = f.registrations_exist || ok;
      f.registration_failed = !ok || f.cover != Cover::Covers;
      continue;
    }
    if (k.before == Before::Release) {
      if (k.path == CopyPath::Original && host == 0) before_passthrough(desc);  // not classified: every side
      else release_range(host, desc.bytes);
    }
    switch (k.path) {
      case CopyPath::Stage:
      case CopyPath::StageAny: {
        staging_prewarm();  // the whole pool from the first staged copy on (one load once it is)
        const trace::PassthroughReason declined = stage_capture_safe(desc, result, k.path == CopyPath::StageAny);
        if (declined == trace::PassthroughReason::None) {
          ts.pending.flags |= trace::kFlagStaged;  // what the event records: the path that ran
          return Action::Done;
        }
        f.staging_declined = declined;
        continue;
      }
      case CopyPath::InPlace:
        ts.pending.flags |= trace::kFlagRegistered;
        return k.wait_after ? Action::OriginalThenWait : Action::Original;
      case CopyPath::Original:
        set_passthrough(ts, k.reason);
        return Action::Original;
    }
  }
  Recorder::instance().note("rewrite: pin: no decision after 8 rounds; the call passes through untouched");
  set_passthrough(ts, trace::PassthroughReason::NoDecision);
  return Action::Original;
}

void detail::record_passthrough(trace::PassthroughReason why) {
  ThreadState& ts = thread_state();
  if (!ts.internal) set_passthrough(ts, why);  // the shim's own calls are not recorded
}

void detail::record_passthrough_off() { record_passthrough(off_reason()); }

int wait_for(const CallDesc& desc) {
  const DriverCalls* d = driver_calls();
  if (!d) return CUDA_SUCCESS;
  InternalScope internal;
  RelaxedCaptureScope capture_safe(*d);  // the shim's own wait, beside an app's graph capture
  return d->sync_stream(desc.flags & trace::kFlagPerThreadStream, reinterpret_cast<CUstream>(desc.stream));
}

void release_range(uint64_t p, uint64_t n) {
  if (!registrations_exist()) return;
  State& s = state();
  const uint64_t end = p + std::max<uint64_t>(n, 1);
  host_ranges().forbid(p, end);
  // Synchronous (the copy hooks are in control): when it returns, nothing
  // over [p, end) -- nor anything the libc hooks queued -- is still in the
  // driver, so the call that follows runs on pageable memory.
  s.counters.released += s.cache.invalidate(p, end);
}

void before_passthrough(const CallDesc& d) {
  if (!registrations_exist() || d.kind != trace::EventKind::Copy || !(d.flags & trace::kFlagAsync)) return;
  if (d.src_preset != MemKind::Array && d.src) release_range(d.src, d.bytes);
  if (d.dst_preset != MemKind::Array && d.dst) release_range(d.dst, d.bytes);
}

void host_memory_going(uint64_t begin, uint64_t end) {
  // Inside free(), munmap(), madvise(): no driver call, no wait (DESIGN
  // principle 10). The registrations over [begin, end) stop answering at once
  // and are unregistered by the next hook that drains
  // (drain_pending_registrations(), lookup(), add()), before any driver call
  // can see them over memory that is no longer theirs.
  if (!registrations_exist()) return;
  State& s = state();
  s.counters.gone += s.cache.invalidate_nowait(begin, end);
}

bool shim_registered(uint64_t p) {
  if (!registrations_exist()) return false;
  // lookup() drains first: a query about memory freed a moment ago reaches
  // the driver only after its registration is gone. An entry still on its way
  // out answers Touches: the app gets the answer for pageable memory.
  return state().cache.lookup(p, 1) != Cover::None;
}

bool memhooks_attached() { return g_memhooks.load(std::memory_order_acquire); }
void set_memhooks_attached() { g_memhooks.store(true, std::memory_order_release); }

void* pageable_probe() {
  static char probe[64];  // the shim's own .bss: nobody registers it
  return probe;
}

void device_memory_made() {
  const Config& c = config();
  // The registrar's thread is started here, beside the staging pool, rather
  // than inside the copy that first hands it a registration.
  if (c.enabled && c.rewrite_pin && c.register_in_place && !c.register_inline && state().registering)
    start_registrar();
}

namespace {
// Before a context goes (`going`: "a context", "a green context"): queued
// registration requests, which would push it, are done, and every
// registration is dropped while it exists; buffers are registered again as
// they are reused.
void drop_registrations_before_teardown(const std::string& going, const char* event) {
  if (!registrations_exist()) return;
  if (!wait_registrations_idle(2000))
    Recorder::instance().note("rewrite: pin: background registrations still running when " + going + " went");
  const uint32_t n = state().cache.clear();
  Recorder::instance().note("rewrite: pin: " + std::to_string(n) + " registrations dropped before " + event +
                                "; buffers are registered again as they are reused",
                            /*warning=*/false);
}
}  // namespace

bool before_context_teardown(CUcontext ctx, int reset_device) {
  const Config& c = config();
  if (!c.enabled || !c.rewrite_any() || thread_state().internal || (!ctx && reset_device < 0)) return false;
  InternalScope internal;
  drop_registrations_before_teardown("a context", "a context reset/destroy");
  zero_copy_teardown(ctx);
  staging_teardown(reset_device >= 0 ? nullptr : ctx);
  return true;
}

bool before_green_context_destroy(CUcontext ctx) {
  const Config& c = config();
  if (!ctx || !c.enabled || !c.rewrite_any() || thread_state().internal) return false;
  InternalScope internal;
  drop_registrations_before_teardown("a green context", "a green context's destroy");
  zero_copy_green_destroy_begins(ctx);
  staging_teardown(ctx);
  return true;
}

void after_green_context_destroy(CUcontext ctx, const CUcontext* primaries) {
  InternalScope internal;
  if (primaries) {
    forget_registrar_context(ctx);
    if (registrations_exist() || config().register_in_place) state().ops.forget_context(ctx);
  }
  zero_copy_green_destroy_done(ctx, primaries);
}

void after_context_teardown(CUcontext ctx) {
  InternalScope internal;
  zero_copy_teardown_done(ctx);
}

bool before_primary_release(CUcontext primary) {
  const Config& c = config();
  if (!primary || !c.enabled || !c.rewrite_any() || thread_state().internal) return false;
  InternalScope internal;
  // Queued registrations bind the context of the copy that asked: done while
  // it still exists (any left are withdrawn after, if it went).
  if (registrations_exist() && !wait_registrations_idle(2000))
    Recorder::instance().note("rewrite: pin: background registrations still running when a context was released");
  zero_copy_release_begins(primary);
  return true;
}

void after_primary_release(CUcontext primary) {
  InternalScope internal;
  zero_copy_teardown_done(primary);
}

void after_context_gone(CUcontext gone) {
  const Config& c = config();
  if (!gone || !c.enabled || !c.rewrite_any()) return;
  InternalScope internal;
  forget_registrar_context(gone);
  if (registrations_exist() || c.register_in_place) state().ops.forget_context(gone);
  // The driver ended the registrations made in it; the cache unregisters every
  // range (an error where the driver did so already; one that fails is kept
  // and tried again) without binding it.
  if (registrations_exist()) {
    const uint32_t n = state().cache.clear();
    Recorder::instance().note("rewrite: pin: " + std::to_string(n) +
                                  " registrations dropped after a primary context's last release; buffers are "
                                  "registered again as they are reused",
                              /*warning=*/false);
  }
  zero_copy_context_gone(gone);
  staging_context_gone(gone);
}

void after_context_destroyed(CUcontext ctx) {
  const Config& c = config();
  if (!ctx || !c.enabled || !c.rewrite_any()) return;
  forget_registrar_context(ctx);
  if (registrations_exist() || c.register_in_place) state().ops.forget_context(ctx);
  zero_copy_context_gone(ctx);  // its buffers went before; threads' events of it are dropped
}

void before_fork() {
  make_state_before_fork();
  if (registrations_exist() || config().register_in_place) state();
  zero_copy_before_fork();
}

void after_fork_child() {
  // The parent's registrations belong to its CUDA context; the child starts
  // with none (and, like the staging pool, no rewrite: CUDA does not survive
  // fork). The cache resets with plain stores, whatever the parent's other
  // threads held when it forked, and queues nothing for the driver.
  if (registrations_exist() || config().register_in_place) state().cache.forget_all_after_fork();
  registrar_after_fork_child();
  host_ranges().clear();
  zero_copy_after_fork_child();
}

void on_shutdown() {
  if (const uint64_t n = detail::g_global_captures_seen.load(std::memory_order_relaxed))
    Recorder::instance().note(
        "rewrite: pin: " + std::to_string(n) + " graph captures in global mode; " +
            std::to_string(copies_left_beside_captures()) +
            " copies were left as the app made them (every copy while a capture was open, every async copy after "
            "the first: a rewritten async copy would make the app's next stream sync a wait the driver refuses "
            "beside a global capture)",
        /*warning=*/false);
  if (!registrations_exist() && state().counters.made == 0 && state().counters.failed == 0) return;
  const Counters& k = state().counters;
  Recorder::instance().note(
      "rewrite: pin: registrations: " + std::to_string(k.made.load()) + " made (" +
          std::to_string(k.made_bytes.load()) + " bytes, " + std::to_string(k.made_ns.load() / 1000) + " us; " +
          std::to_string(background_registrations()) + " made off the copying thread), " +
          std::to_string(k.failed.load()) + " failed, " + std::to_string(k.app_overlap.load()) +
          " left to the app's own registrations, " + std::to_string(k.gone.load()) +
          " dropped as their memory went away, " + std::to_string(k.evicted.load()) + " evicted or merged, " +
          std::to_string(k.released.load()) + " dropped for exact passthrough",
      /*warning=*/false);
}

}  // namespace cuxfer::shim::rewrite
