// The one path every intercepted call takes. The outermost hook of a user
// call owns its event; a driver hook nested inside a runtime hook only adds
// what it knows (one event per user call, whichever layers it passes).
//
// Hot path: one TLS access, a few relaxed atomics on one line (core/hot_line.h),
// two time-stamp counter reads (core/event_clock.h; two more, and three in the
// stack capture, in about one call of 64, timed whole), a table lookup per
// pointer, a ring push.
// No lock, allocation or system call.
#pragma once

#include <cstdint>

#include "core/clock.h"
#include "core/config.h"
#include "core/event_clock.h"
#include "core/hot_line.h"
#include "core/phase_probe.h"
#include "record/call_desc.h"
#include "symbols/symbol_table.h"
#include "record/recorder.h"
#include "record/site_capture.h"
#include "rewrite/registration_cache.h"

namespace cuxfer::shim {

namespace rewrite {
void per_thread_stream_used();  // rewrite/zero_copy.h
}

// Where a hook was called from: its return address, and its own frame
// address, where the stack walk starts (unwind::walk_from: the shim's frames
// between the hook and the walk are not stepped). Taken in the exported hook
// itself, by CUXFER_CALLER: __builtin_frame_address(0) gives the function a
// frame pointer, so the frame holds the caller's rbp with the return address
// above it (walk_from checks that, and walks from its own frame if not).
struct Caller {
  void* return_address;
  const void* frame;
};
#define CUXFER_CALLER (::cuxfer::shim::Caller{__builtin_return_address(0), __builtin_frame_address(0)})

// Classifies the described pointers and fills the event's transfer fields.
void describe_event(const CallDesc& d, trace::Event& e);
// Captures the call stack, or just the caller's return address (`how`,
// record/site_capture.h), and interns it; with `times`, says what the two
// walks took (a timed call, record/hook_time.h).
// Called before the real function: read after it, the stack cost more, not
// less (a copy's staging evicts the lines the walks read, the frames' among
// them; docs/benchmarks.md, seventeenth session).
uint32_t capture_callsite(Recorder& rec, Caller caller, SiteCapture how, StackTimes* times = nullptr);
// capture_callsite(), its time added to `times` when the call is timed whole.
CUXFER_INLINE uint32_t timed_capture(Recorder& rec, Caller caller, SiteCapture how, bool timed, StackTimes& times) {
  if (!timed) return capture_callsite(rec, caller, how);
  const uint64_t t0 = event_clock::stamp();
  const uint32_t id = capture_callsite(rec, caller, how, &times);
  times.total_ns = event_clock::span_ns(t0, event_clock::stamp());
  return id;
}
// Smallest copy fingerprinted (UINT64_MAX: fingerprints off); read once the recorder started.
CUXFER_INLINE uint64_t fingerprint_min_bytes() { return g_hot_line.fingerprint_min; }
// Prefetches the words the fingerprint of copy `d` will read, where the copy
// itself will not bring them in: host memory the GPU reads or writes by DMA
// (pinned, registered, and pageable memory the rewrite may register). A
// pageable copy the driver makes is staged by the CPU, which touches every
// byte; prefetching it first only adds its TLB misses (~0.8 us a 1 MiB copy,
// bench/python_step_pattern.py).
void prefetch_samples(const CallDesc& d);
// Emits the content fingerprint of the copy `e` just recorded, when its host
// side may be read now (record/fingerprint.h).
void fingerprint_copy(Recorder& rec, ThreadState& ts, const trace::Event& e);

struct NoPost {
  template <typename R>
  void operator()(R, trace::Event*) const {}
};

// Runs `call` (the real function) on behalf of hook `id`.
// `post(result, event)` runs after the real call whatever the mode, so that
// allocation tables stay current; `event` is null unless this hook owns it.
template <typename R, typename Call, typename Post = NoPost>
inline R intercept(HookId id, const CallDesc& d, Caller caller, Call&& call,
                   Post&& post = Post{}) {
  ThreadState& ts = thread_state();
  if (ts.internal) return call();
  if (!ts.in_call) CUXFER_PHASE(kEntry);  // a development build's phase account (core/phase_probe.h)
  // Registrations of memory the app has freed are dropped here, before any
  // CUDA call can meet one (the libc hooks only queue them: free() never
  // waits on the driver). One load when nothing is queued.
  rewrite::drain_pending_registrations();
  Recorder& rec = Recorder::instance();
  if (ts.in_call) {
    // Nested: a driver hook under a runtime hook (or a runtime call that
    // re-enters the runtime). Refine the owner's description, don't record.
    if (ts.runtime_owner && layer_of(id) == Layer::Driver) {
      ts.driver_seen = true;
      rec.ensure_driver_attached(ts);
      if (d.kind == ts.desc.kind &&
          (d.kind == trace::EventKind::Copy || d.kind == trace::EventKind::Memset)) {
        if (!ts.driver_contributed) {
          uint64_t stream = ts.desc.stream;
          ts.desc = d;
          ts.desc.stream = stream;  // the app's handle, as it passed it
          ts.driver_contributed = true;
        } else {
          ts.desc.bytes += d.bytes;  // a runtime call split into several driver copies
          ts.multi_piece = true;
        }
      }
    }
    R r = call();
    post(r, static_cast<trace::Event*>(nullptr));
    return r;
  }
  if (!rec.ensure_started()) {
    R r = call();
    post(r, static_cast<trace::Event*>(nullptr));
    return r;
  }

  // Outside the capture range (record/capture_range.h) nothing is recorded:
  // the call passes through, unless the rewrite may take it over, which needs
  // the call site (site policies) and the event being built (the path it took).
  const bool capturing = rec.capturing();
  if (!capturing && !g_hot_line.rewrite_any) [[unlikely]] {
    CUXFER_PHASE(kPassGate);
    R r = call();
    CUXFER_PHASE(kPassCall);
    post(r, static_cast<trace::Event*>(nullptr));
    return r;
  }

  CUXFER_PHASE(kGate);
  CUXFER_PHASE_ADDRESS("thread_state", &ts);
  ts.in_call = true;
  // About one call in EventRing::kHookTimeEvery is timed whole: its time outside
  // the real call is what the shim's own work cost the app (the shutdown
  // note, Recorder::hook_time_summary).
  EventRing* const ring = rec.ring_of(ts);
  const bool timed = capturing && ring && ring->count_hook_call();
  // Timed with the same stamps as every call reads: the account is what an untimed call pays.
  const uint64_t hook_t0 = timed ? event_clock::stamp() : 0;
  CUXFER_PHASE(kSetup);
  // Work on a per-thread default stream: the zero-copy path's "nothing pending" shortcut is off.
  if (d.flags & trace::kFlagPerThreadStream) rewrite::per_thread_stream_used();
  ts.runtime_owner = layer_of(id) == Layer::Runtime;
  if (!ts.runtime_owner) rec.ensure_driver_attached(ts);
  CUXFER_PHASE(kDriverCheck);
  ts.driver_seen = false;
  ts.driver_contributed = false;
  ts.mapped = false;
  ts.multi_piece = false;
  ts.desc = d;
  trace::Event& e = ts.pending;
  e = trace::Event{};
  e.api = static_cast<uint16_t>(id);
  e.thread_id = ts.tid;
  e.correlation_id = rec.next_correlation(ts);
  CUXFER_PHASE(kEvent);
  StackTimes stack_times;
  e.callsite_id = timed_capture(rec, caller, site_capture(d.kind, rec.stack_depth(), rec.memset_stacks()), timed,
                                stack_times);
  CUXFER_PHASE(kCallSite);
  // GPU records are matched to calls offline by stream order, time and size
  // (docs/trace-format.md): nothing CUPTI-related runs on this path.
  if (rec.gpu_expected()) e.flags |= trace::kFlagGpuExpected;
  if (d.kind == trace::EventKind::Copy && d.bytes >= fingerprint_min_bytes()) prefetch_samples(d);
  e.t_enter_ns = event_clock::stamp();  // a stamp: converted to nanoseconds by the writer
  CUXFER_PHASE(kBeforeCall);
  R r = call();
  CUXFER_PHASE(kRealCall);
  e.t_exit_ns = event_clock::stamp();
  CUXFER_PHASE(kAfterCall);
  post(r, &e);
  describe_event(ts.desc, e);
  CUXFER_PHASE(kDescribe);
  if (ts.runtime_owner && !ts.driver_contributed &&
      (ts.desc.kind == trace::EventKind::Copy || ts.desc.kind == trace::EventKind::Memset))
    e.flags |= trace::kFlagRuntimeOnly;
  // The rewrite's executor set kFlagStaged or kFlagRegistered on `e` for the path that ran.
  if (ts.mapped) e.dst_kind = static_cast<uint8_t>(trace::MemKind::Mapped);
  e.result = trace::record_result(static_cast<long long>(r));
  if (r != 0) e.flags |= trace::kFlagFailed;
  if (capturing) {
    rec.emit(ts, e);
    CUXFER_PHASE(kEmit);
    if (e.bytes >= fingerprint_min_bytes() && e.kind == static_cast<uint8_t>(trace::EventKind::Copy))
      fingerprint_copy(rec, ts, e);
  }
  if (timed) {
    const uint64_t whole = event_clock::span_ns(hook_t0, event_clock::stamp());
    const uint64_t inner = event_clock::span_ns(e.t_enter_ns, e.t_exit_ns);
    ring->add_hook_time(whole > inner ? whole - inner : 0, stack_times);
  }
  ts.in_call = false;
  CUXFER_PHASE(kTail);
  return r;
}

}  // namespace cuxfer::shim
