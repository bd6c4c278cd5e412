#include "rewrite/copy_decision.h"

namespace cuxfer::shim::rewrite {
namespace {

using policy::Path;
using trace::MemKind;
using Why = trace::PassthroughReason;

CopyDecision run(CopyPath p, Before before = Before::Nothing, bool wait = false) {
  CopyDecision d;
  d.path = p;
  d.before = before;
  d.wait_after = wait;
  return d;
}

// The app's call as made, for the reason `why` (what the event records).
CopyDecision passed(Why why, Before before = Before::Nothing) {
  CopyDecision d = run(CopyPath::Original, before);
  d.reason = why;
  return d;
}

CopyDecision ask_stream() {
  CopyDecision d;
  d.need_stream = true;
  return d;
}

// The app's call as it made it. An async copy must then not run on memory
// the shim registered (for this or another site): it would lose its pageable
// semantics, so those registrations go first.
CopyDecision as_made(const CopyFacts& f, Why why) {
  return passed(why, f.async && f.registrations_exist ? Before::Release : Before::Nothing);
}

// A range the shim has registered, all of it.
CopyDecision on_covered(const CopyFacts& f, const RewriteSettings& s) {
  if (!f.async) return run(CopyPath::InPlace);  // same semantics, DMA speed
  const bool small_h2d = f.way == CopyWay::HtoD && f.bytes < s.bounce_below;
  // An async H2D must return once its source is consumed, not once its DMA
  // is done. A small one is copied out through a pinned bounce buffer, as
  // fast as the driver's own pageable path; so is one on a busy stream, where
  // a DMA in place would make the call wait for the work ahead of it.
  if (small_h2d && !f.declined()) return run(CopyPath::StageAny);
  if (f.stream == StreamState::Unknown) return ask_stream();
  // A stream being captured cannot be waited on: the range is made pageable
  // again and the call goes to the driver as it was made.
  if (f.stream == StreamState::Capturing) return passed(Why::StreamCapturing, Before::Release);
  // With the staging pool full, the DMA in place would make the call wait for
  // the whole stream: a stall the pageable original never had, and a
  // deadlock where the stream waits on the host (cuStreamWaitValue32, a host
  // function). The app's own call is the answer, on pageable memory again.
  if (f.way == CopyWay::HtoD && f.stream == StreamState::Busy)
    return f.declined() ? passed(f.staging_declined, Before::Release) : run(CopyPath::StageAny);
  // DMA in place, then wait: what the pageable original's return means (D2H:
  // complete; H2D: source consumed).
  return run(CopyPath::InPlace, Before::Nothing, /*wait=*/true);
}

}  // namespace

CopyDecision decide(const CopyFacts& f, const RewriteSettings& s) {
  if (f.bytes == 0) return passed(Why::Empty);
  const bool matched = f.site_matched;
  if (matched && f.site_path == Path::Exclude) return as_made(f, Why::PolicyExclude);
  if (!matched && !s.rewrite_pin) return as_made(f, Why::NotPolicySite);  // a policy alone rewrites only its sites
  if (f.way == CopyWay::Unknown) {
    CopyDecision d;
    d.need_classify = true;
    return d;
  }
  if (f.way == CopyWay::Other) return passed(Why::NotHostDevice);
  // The app's own pinned (or registered) memory: not the rewrite's business.
  if (f.host_kind != MemKind::Pageable && f.cover == Cover::None) return passed(Why::NotPageable);
  // Beside an open global-mode capture the call leaves its stream as the
  // driver's pageable path would: nothing staged or registered; a range the
  // shim registered before is copied in place and, when async, waited for
  // (in relaxed mode) so that the stream is idle again; a range half
  // registered is made pageable again first.
  if (f.global_capture) {
    if (f.cover == Cover::Covers) return run(CopyPath::InPlace, Before::Nothing, /*wait=*/f.async);
    if (f.cover == Cover::Touches) return passed(Why::GlobalCapture, Before::Release);
    return passed(Why::GlobalCapture);
  }
  // After one: an async copy must leave its stream as the driver's pageable
  // path does, since a capture may begin before the app's next sync (no DMA
  // in place, nothing staged); a range the shim registered is made pageable
  // again first. Synchronous copies are rewritten as before.
  if (f.global_capture_seen && f.async) return as_made(f, Why::AfterGlobalCapture);
  if (matched && f.site_path == Path::Stage)
    return f.declined() ? as_made(f, f.staging_declined) : run(CopyPath::StageAny);
  const bool force_register = matched && f.site_path == Path::Register;

  if (!s.registering && !f.registrations_exist) {
    // No registration here (CUXFER_REGISTER=off, or no libc hooks): a
    // policy's passthrough stays the app's call, its register is staged.
    if (f.declined()) return passed(f.staging_declined);
    if (matched) return force_register ? run(CopyPath::StageAny) : as_made(f, Why::PolicyPassthrough);
    if (f.way != CopyWay::Unknown && f.bytes < (f.way == CopyWay::HtoD ? s.stage_min_h2d : s.stage_min_d2h))
      return as_made(f, Why::BelowThreshold);
    return run(CopyPath::Stage);
  }

  if (f.cover == Cover::Covers) return on_covered(f, s);
  if (f.cover == Cover::Touches) {
    // Partly registered (a neighbour's registration reaches into its first or
    // last page, or one is changing): the driver never sees such a range.
    // Staged it is exact in every direction and mode; else it is made
    // pageable again first -- unless the range is this call's own
    // reservation: then it is registered now, and the copy runs on it.
    if (!f.declined()) return run(CopyPath::StageAny);
    if (f.reserved_here) return run(CopyPath::Original, Before::RegisterReserved);
    return passed(f.staging_declined, Before::Release);
  }

  // Not registered (yet): count the reuse; register when it has paid.
  if (s.registering && !f.registration_failed) {
    if (f.reuse == ReuseVerdict::NotAsked) {
      // A large async H2D counts only on an idle stream, where a registered
      // buffer is DMA'd in place (PyTorch's .to("cuda") from a reused host
      // array); on a busy one it would be staged anyway. Small copies never
      // count: the driver's path is as fast as pinned for them.
      const bool big_async_h2d = f.async && f.way == CopyWay::HtoD && f.bytes >= s.stage_min_h2d;
      const bool counts = f.bytes >= s.count_min || force_register;
      if (counts && big_async_h2d && f.stream == StreamState::Unknown) return ask_stream();
      if (counts && (!big_async_h2d || f.stream == StreamState::Idle)) {
        CopyDecision d;
        d.count_reuse = true;
        return d;
      }
    }
    // The policy's "passthrough" counts the reuse but never rewrites this call.
    if (matched && f.site_path == Path::Passthrough) return as_made(f, Why::PolicyPassthrough);
    // The policy's "register" does not wait for the buffer's reuse to pay.
    const bool now = f.reuse == ReuseVerdict::RegisterNow || (force_register && f.reuse == ReuseVerdict::Wait);
    if (now) {
      if (f.async && f.stream == StreamState::Unknown) return ask_stream();
      if (!(f.async && f.stream == StreamState::Capturing)) {
        // A policy's "register" entry: in place from this copy on, as asked.
        if (!s.register_in_background || f.declined() || force_register)
          return run(CopyPath::Original, Before::Register);
        // The driver call goes to the registrar's thread; this copy is
        // staged meanwhile. An async one always (the driver must never see
        // the range being pinned under an async call: it could DMA from it
        // after the call returned); a sync one at the staging thresholds,
        // below them the app's own call (its semantics do not change).
        const bool stage = f.async || f.bytes >= (f.way == CopyWay::HtoD ? s.stage_min_h2d : s.stage_min_d2h);
        return run(stage ? CopyPath::StageAny : CopyPath::Original, Before::RegisterInBackground);
      }
    }
  } else if (matched && f.site_path == Path::Passthrough) {
    return as_made(f, Why::PolicyPassthrough);
  }
  if (f.declined()) return passed(f.staging_declined);
  if (force_register) return run(CopyPath::StageAny);
  // Below the staging thresholds the driver's own path is the faster one:
  // the app's call, without asking the staging path to look at it again.
  if (f.bytes < (f.way == CopyWay::HtoD ? s.stage_min_h2d : s.stage_min_d2h)) return as_made(f, Why::BelowThreshold);
  return run(CopyPath::Stage);
}

const char* path_name(CopyPath p) {
  switch (p) {
    case CopyPath::Original: return "original";
    case CopyPath::InPlace: return "in_place";
    case CopyPath::Stage: return "stage";
    case CopyPath::StageAny: return "stage_any";
  }
  return "?";
}

}  // namespace cuxfer::shim::rewrite
