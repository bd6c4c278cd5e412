// The pinned rewrite's decision for one 1D host<->device copy, as a value.
//
// A hook classifies the call once (CopyFacts), asks decide() what to do, makes
// what it says happen (pinned_rewrite.cpp) and records the path that ran.
// decide() is pure: the same facts give the same decision, and every case the
// rewrite knows is a row of tests/unit/shim/copy_decision_test.cpp, including
// each cell of the never-slower sweep (bench/pattern_sweep.cpp).
//
// Facts that cost a driver call (is the stream idle? being captured?) start
// as Unknown; when the answer matters decide() says need_stream and the hook
// asks the driver and decides again. Steps with side effects work the same
// way: counting the copy toward its buffer's reuse (count_reuse), registering
// the buffer (Before::Register), a staging path that declined
// (staging_declined): the hook does the step, updates the facts and decides
// again, until the decision is a path to run.
//
// A decision to run the app's call as made says why (CopyDecision::reason):
// the event records it, and the report counts the copies the rewrite left
// alone per reason, not as a list of possibilities.
#pragma once

#include <cstdint>

#include "policy/policy.h"
#include "rewrite/registration_cache.h"
#include "trace/event.h"

namespace cuxfer::shim::rewrite {

enum class CopyWay : uint8_t {
  Unknown,  // not classified yet: decide() asks for it (need_classify)
  Other,    // not a host<->device copy (device to device, host to host, managed, ...)
  HtoD,
  DtoH,
};
enum class StreamState : uint8_t { Unknown, Idle, Busy, Capturing };
enum class ReuseVerdict : uint8_t {
  NotAsked,     // the copy was not counted yet
  NotCounted,   // it does not count (too small, or a busy stream's large async H2D)
  Wait,         // counted; its range has not paid for a registration yet
  RegisterNow,  // counted; register the range now and copy from it
  Never,        // not observed by the libc hooks, or forbidden: never registered
};

struct RewriteSettings {
  bool rewrite_pin = false;   // CUXFER_REWRITE=pin (else only a policy's sites are rewritten)
  bool registering = false;   // registration in place possible (libc hooks loaded, not CUXFER_REGISTER=off)
  uint64_t stage_min_h2d = 8u << 20;
  uint64_t stage_min_d2h = 256u << 10;
  // Async H2D from a registered range below this is copied out through a
  // pinned bounce buffer (the call returns once its source is consumed, as
  // the driver's pageable path does) instead of waiting for its DMA.
  uint64_t bounce_below = 256u << 10;
  // Copies below this never count toward registering their buffer: the
  // driver's own path is as fast as pinned there (it inlines them).
  uint64_t count_min = 16u << 10;
  // Registrations are made off the copying thread (CUXFER_REGISTER=auto; inline: in the copy).
  bool register_in_background = false;
};

struct CopyFacts {
  // From classifying the pointers (need_classify): way, host_kind, cover.
  CopyWay way = CopyWay::Unknown;
  trace::MemKind host_kind = trace::MemKind::Unknown;  // of the host side
  uint64_t bytes = 0;
  bool async = false;
  bool registrations_exist = false;  // the shim holds any registration
  Cover cover = Cover::None;         // the shim's registrations over the host range
  StreamState stream = StreamState::Unknown;
  ReuseVerdict reuse = ReuseVerdict::NotAsked;
  // A graph capture in global mode is open somewhere in the process
  // (capture_watch.h): the copy must leave its stream as the app's own call
  // would, or the app's next sync is refused and the capture invalidated.
  bool global_capture = false;
  // The process has begun a global-mode capture before (capture_watch.h):
  // async copies are left as made from then on.
  bool global_capture_seen = false;
  bool site_matched = false;  // the policy file names this call site
  policy::Path site_path = policy::Path::Passthrough;
  // Outcomes of earlier steps of the same call, decided again.
  // The staging path could not take it, and why (no free buffer, no pool in
  // its context, ...); None: not asked, or not declined.
  trace::PassthroughReason staging_declined = trace::PassthroughReason::None;
  bool registration_failed = false;  // Before::Register did not give a registration
  // This call holds its range's reservation for the background registrar
  // (Before::RegisterInBackground): the range answers Touches because of it
  // alone, and nothing over it is in the driver yet.
  bool reserved_here = false;

  bool declined() const { return staging_declined != trace::PassthroughReason::None; }
};

enum class CopyPath : uint8_t {
  Original,  // the app's call, as it made it
  InPlace,   // the app's call, on a range the shim registered (pinned DMA)
  Stage,     // through the staging pool, at the size thresholds
  StageAny,  // through the staging pool whatever the size (a bounce buffer for small copies)
};
enum class Before : uint8_t {
  Nothing,
  Register,  // register the counted range, then decide again (cover, or registration_failed)
  // Reserve the counted range, run `path` for this copy, then have the
  // background registrar register it (rewrite/background_registrar.h); the
  // copies after it find the range registered. Not reserved:
  // registration_failed, and decide again.
  RegisterInBackground,
  // Register the range this call reserved (RegisterInBackground) now, on this
  // thread, then decide again (cover, or registration_failed): the staging
  // path declined the copy, and the reservation must not be left answering
  // Touches under the app's own call.
  RegisterReserved,
  Release,   // drop the shim's registrations under the range (they would change the call's semantics)
};

struct CopyDecision {
  bool need_classify = false;  // classify the pointers and look up the cover, then decide again
  bool need_stream = false;  // ask the driver for CopyFacts::stream, then decide again
  bool count_reuse = false;  // count the copy toward its range's reuse, then decide again
  Before before = Before::Nothing;  // Register: do it, then decide again with the new cover
  CopyPath path = CopyPath::Original;
  bool wait_after = false;   // InPlace async: wait for the stream (pageable semantics on pinned memory)
  // Original, with no step left to take: why the app's call runs as made
  // (what the event records). None on every other decision.
  trace::PassthroughReason reason = trace::PassthroughReason::None;

  bool operator==(const CopyDecision&) const = default;
};

CopyDecision decide(const CopyFacts& f, const RewriteSettings& s);

// For logs and test failure messages.
const char* path_name(CopyPath p);

}  // namespace cuxfer::shim::rewrite
