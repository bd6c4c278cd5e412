#include "rewrite/pinned_rewrite.h"

#include "rewrite/site_policy.h"
#include "rewrite/zero_copy.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "interpose/symbol_table.h"
#include "memory/host_ranges.h"
#include "memory/pointer_classifier.h"
#include "record/recorder.h"
#include "rewrite/driver_calls.h"
#include "rewrite/registration_cache.h"

namespace cuxfer::shim::rewrite {
namespace detail {
std::atomic<uint32_t> g_registrations{0};
}  // namespace detail

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
    CUcontext ctx = nullptr;
    if (d->ctx_get_current(&ctx) == CUDA_SUCCESS && ctx) {
      CUcontext expected = nullptr;
      context_.compare_exchange_strong(expected, ctx);  // the one unregister falls back to
    }
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
    int r = d->host_unregister(reinterpret_cast<void*>(begin));
    if (pushed) {
      CUcontext popped = nullptr;
      d->ctx_pop_current(&popped);
    }
    return r;
  }
  // The allocation table marks the range as the app's pageable memory, so
  // that classification (which would ask the driver and hear "pinned") keeps
  // reporting what the app has.
  void on_registered(uint64_t begin, uint64_t end) override {
    allocation_table().insert(begin, end - begin, MemKind::Pageable, -1);
  }
  void on_unregistered(uint64_t begin, uint64_t) override { allocation_table().erase(begin); }

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
  e.result = r.status;
  if (r.status != 0) e.flags |= trace::kFlagFailed;
  Recorder::instance().emit(ts, e);
}

// Registers the observed range [begin, end) now. True when it is registered.
bool register_range(State& s, uint64_t begin, uint64_t end) {
  const uint64_t t0 = now_ns();
  AddResult r = s.cache.add(begin, end);
  const uint64_t t1 = now_ns();
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

enum class Way { HtoD, DtoH };

bool host_kind(MemKind k) { return k == MemKind::Pageable || k == MemKind::Pinned || k == MemKind::Registered; }

}  // namespace

Action try_rewrite(const CallDesc& desc, int& result) {
  ThreadState& ts = thread_state();
  if (desc.kind != trace::EventKind::Copy || desc.bytes == 0 || ts.internal) return Action::Original;
  if (desc.src_preset == MemKind::Array || desc.dst_preset == MemKind::Array) return Action::Original;
  auto stage = [&](bool any_size = false) { return try_stage(desc, result, any_size) ? Action::Done : Action::Original; };
  // The policy file's word for this call site, if it names it (site_policy.h).
  const SiteDecision site = site_decision(policy::SiteKind::Call, desc.bytes);
  const Config& c = config();
  // Made as the app made it: an async copy must then not run on memory the
  // shim registered for another site (it would lose its pageable semantics).
  auto original = [&] {
    if ((desc.flags & trace::kFlagAsync) && registrations_exist()) before_passthrough(desc);
    return Action::Original;
  };
  if (!site.matched && !c.rewrite_pin) return original();  // a policy alone rewrites only its sites
  const policy::Path path = site.matched ? site.path : policy::Path::Passthrough;
  if (site.matched && path == policy::Path::Exclude) return original();
  if (site.matched && path == policy::Path::Stage) {
    if (try_stage(desc, result, /*any_size=*/true)) return Action::Done;
    return original();
  }
  const bool force_register = site.matched && path == policy::Path::Register;
  const bool registrations = registrations_exist();
  State* s = nullptr;
  if (registrations || config().register_in_place) s = &state();
  if (!s || (!s->registering && !registrations)) {
    // No registration here (CUXFER_REGISTER=off, or no libc hooks): a policy's
    // passthrough stays the app's call, its register is staged instead.
    if (site.matched) return force_register ? stage(/*any_size=*/true) : original();
    return stage();
  }

  PointerInfo src = classify_pointer(desc.src), dst = classify_pointer(desc.dst);
  Way way;
  if (host_kind(src.kind) && dst.kind == MemKind::Device) way = Way::HtoD;
  else if (src.kind == MemKind::Device && host_kind(dst.kind)) way = Way::DtoH;
  else return Action::Original;
  if (desc.direction != trace::Direction::Unknown &&
      desc.direction != (way == Way::HtoD ? trace::Direction::HtoD : trace::Direction::DtoH))
    return Action::Original;
  const uint64_t host = way == Way::HtoD ? desc.src : desc.dst;
  const MemKind kind = way == Way::HtoD ? src.kind : dst.kind;
  const bool async = desc.flags & trace::kFlagAsync;
  const bool per_thread = desc.flags & trace::kFlagPerThreadStream;

  Cover cover = registrations ? s->cache.lookup(host, desc.bytes) : Cover::None;
  if (cover == Cover::None && kind != MemKind::Pageable) return Action::Original;  // the app's own pinned memory

  const DriverCalls* d = driver_calls();
  if (cover == Cover::None) {
    // Not registered (yet): count the reuse; register when it has paid. A
    // large async H2D counts only on an idle stream, where a registered
    // buffer is DMA'd in place (PyTorch's .to("cuda") from a reused host
    // array); on a busy one it would be staged anyway.
    const bool big_async_h2d = async && way == Way::HtoD && desc.bytes >= c.stage_min_h2d;
    const bool counts = s->registering &&
                        (!big_async_h2d || (d && d->idle(per_thread, reinterpret_cast<CUstream>(desc.stream))));
    if (counts && d) {
      RegisterVerdict v = host_ranges().note_copy(host, desc.bytes, s->cache.budget());
      // The policy's "register" does not wait for the buffer's reuse to pay;
      // its "passthrough" counts the reuse but never rewrites this call.
      if (force_register && v.tracked && !v.forbidden && v.end - v.begin <= s->cache.budget()) v.register_now = true;
      if (site.matched && path == policy::Path::Passthrough) return original();
      if (v.register_now && !(async && d->capturing(per_thread, reinterpret_cast<CUstream>(desc.stream)))) {
        ++ts.internal;
        bool ok = register_range(*s, v.begin, v.end);
        --ts.internal;
        if (ok) cover = s->cache.lookup(host, desc.bytes);
      }
    }
    if (cover == Cover::None) return force_register ? stage(/*any_size=*/true) : stage();
  }

  if (cover == Cover::Touches) {
    // Partly registered (a neighbour's registration reaches into its first or
    // last page, or one is changing): the driver never sees such a range.
    // Staged, it is exact in every direction and mode; else it is made
    // pageable again first.
    if (try_stage(desc, result, /*any_size=*/true)) return Action::Done;
    release_range(host, desc.bytes);
    return Action::Original;
  }
  // The whole host range is registered by the shim.
  if (!async) {
    ts.registered = true;
    return Action::Original;  // now on pinned memory: same semantics, DMA speed
  }
  if (!d || d->capturing(per_thread, reinterpret_cast<CUstream>(desc.stream))) {
    release_range(host, desc.bytes);  // no wait possible: make it pageable again first
    return Action::Original;
  }
  if (way == Way::HtoD && desc.bytes >= c.stage_min_h2d && !d->idle(per_thread, reinterpret_cast<CUstream>(desc.stream))) {
    // Must return once the source is consumed, and the stream is busy: a DMA
    // in place would make the call wait for the work ahead of it. Copy it out
    // now instead. (On an idle stream the DMA in place returns sooner.)
    if (try_stage(desc, result, /*any_size=*/true)) return Action::Done;
    release_range(host, desc.bytes);
    return Action::Original;
  }
  ts.registered = true;
  return Action::OriginalThenWait;
}

int wait_for(const CallDesc& desc) {
  const DriverCalls* d = driver_calls();
  if (!d) return CUDA_SUCCESS;
  InternalScope internal;
  return d->sync_stream(desc.flags & trace::kFlagPerThreadStream, reinterpret_cast<CUstream>(desc.stream));
}

void release_range(uint64_t p, uint64_t n) {
  if (!registrations_exist()) return;
  State& s = state();
  const uint64_t end = p + std::max<uint64_t>(n, 1);
  host_ranges().forbid(p, end);
  s.counters.released += s.cache.invalidate(p, end);
}

void before_passthrough(const CallDesc& d) {
  if (!registrations_exist() || d.kind != trace::EventKind::Copy || !(d.flags & trace::kFlagAsync)) return;
  if (d.src_preset != MemKind::Array && d.src) release_range(d.src, d.bytes);
  if (d.dst_preset != MemKind::Array && d.dst) release_range(d.dst, d.bytes);
}

void host_memory_going(uint64_t begin, uint64_t end) {
  if (!registrations_exist()) return;
  state().counters.gone += state().cache.invalidate(begin, end);
}

bool shim_registered(uint64_t p) {
  if (!registrations_exist()) return false;
  return state().cache.lookup(p, 1) != Cover::None;
}

bool memhooks_attached() { return g_memhooks.load(std::memory_order_acquire); }
void set_memhooks_attached() { g_memhooks.store(true, std::memory_order_release); }

void* pageable_probe() {
  static char probe[64];  // the shim's own .bss: nobody registers it
  return probe;
}

void before_context_teardown(CUcontext ctx) {
  const Config& c = config();
  if (!c.enabled || !c.rewrite_any() || thread_state().internal) return;
  InternalScope internal;
  if (registrations_exist()) {
    const uint32_t n = state().cache.clear();
    Recorder::instance().note("rewrite: pin: " + std::to_string(n) +
                                  " registrations dropped before a context reset/destroy; buffers are registered "
                                  "again as they are reused",
                              /*warning=*/false);
  }
  zero_copy_teardown();
  staging_teardown(ctx);
}

void after_fork_child() {
  // The parent's registrations belong to its CUDA context; the child starts
  // with none (and, like the staging pool, no rewrite: CUDA does not survive fork).
  if (registrations_exist() || config().register_in_place) state().cache.forget_all_after_fork();
  host_ranges().clear();
}

void on_shutdown() {
  if (!registrations_exist() && state().counters.made == 0 && state().counters.failed == 0) return;
  const Counters& k = state().counters;
  Recorder::instance().note(
      "rewrite: pin: registrations: " + std::to_string(k.made.load()) + " made (" +
          std::to_string(k.made_bytes.load()) + " bytes, " + std::to_string(k.made_ns.load() / 1000) + " us), " +
          std::to_string(k.failed.load()) + " failed, " + std::to_string(k.app_overlap.load()) +
          " left to the app's own registrations, " + std::to_string(k.gone.load()) +
          " dropped as their memory went away, " + std::to_string(k.evicted.load()) + " evicted or merged, " +
          std::to_string(k.released.load()) + " dropped for exact passthrough",
      /*warning=*/false);
}

}  // namespace cuxfer::shim::rewrite
