// The pinned rewrite's decision table (shim/rewrite/copy_decision.h), case
// by case. The "sweep" cases are the cells of bench/pattern_sweep.cpp: what
// the rewrite does with each, and why it is never slower than the driver.
// Every decision that runs the app's call as made names its reason (what the
// event records, and the report counts): each such branch is asserted with it.
#include "rewrite/copy_decision.h"

#include <gtest/gtest.h>

namespace cuxfer::shim::rewrite {
namespace {

using policy::Path;
using trace::MemKind;
using Why = trace::PassthroughReason;
constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

RewriteSettings pin() {
  RewriteSettings s;
  s.rewrite_pin = true;
  s.registering = true;
  return s;
}

CopyFacts copy(CopyWay way, uint64_t bytes, bool async = false, MemKind host = MemKind::Pageable) {
  CopyFacts f;
  f.way = way;
  f.bytes = bytes;
  f.async = async;
  f.host_kind = host;
  return f;
}

CopyFacts covered(CopyWay way, uint64_t bytes, bool async, StreamState st = StreamState::Unknown) {
  CopyFacts f = copy(way, bytes, async);
  f.registrations_exist = true;
  f.cover = Cover::Covers;
  f.stream = st;
  return f;
}

CopyDecision path(CopyPath p, Before b = Before::Nothing, bool wait = false) {
  CopyDecision d;
  d.path = p;
  d.before = b;
  d.wait_after = wait;
  return d;
}

// The app's call as made, for the reason `why`.
CopyDecision passed(Why why, Before b = Before::Nothing) {
  CopyDecision d = path(CopyPath::Original, b);
  d.reason = why;
  return d;
}

TEST(CopyDecision, UnclassifiedAsksForClassification) {
  CopyFacts f;
  f.bytes = MiB;
  EXPECT_TRUE(decide(f, pin()).need_classify);
}

TEST(CopyDecision, PolicyAloneLeavesUnnamedSitesAloneWithoutClassifying) {
  RewriteSettings s = pin();
  s.rewrite_pin = false;
  CopyFacts f;
  f.bytes = MiB;
  EXPECT_EQ(decide(f, s), passed(Why::NotPolicySite));
  f.async = true;
  f.registrations_exist = true;  // another site's registration may lie under it
  EXPECT_EQ(decide(f, s), passed(Why::NotPolicySite, Before::Release));
}

TEST(CopyDecision, EmptyCopiesAreLeftAsMade) {
  CopyFacts f;
  EXPECT_EQ(decide(f, pin()), passed(Why::Empty));
  f = copy(CopyWay::HtoD, 0, /*async=*/true);
  f.registrations_exist = true;
  EXPECT_EQ(decide(f, pin()), passed(Why::Empty));
}

TEST(CopyDecision, AppsOwnPinnedMemoryAndDeviceCopiesAreUntouched) {
  for (bool async : {false, true}) {
    EXPECT_EQ(decide(copy(CopyWay::HtoD, 4 * KiB, async, MemKind::Pinned), pin()), passed(Why::NotPageable));
    EXPECT_EQ(decide(copy(CopyWay::DtoH, 64 * MiB, async, MemKind::Registered), pin()), passed(Why::NotPageable));
    EXPECT_EQ(decide(copy(CopyWay::Other, 64 * MiB, async), pin()), passed(Why::NotHostDevice));
  }
}

TEST(CopyDecision, FirstSightCountsThenStagesAtTheThresholds) {
  CopyFacts f = copy(CopyWay::HtoD, 64 * MiB);
  EXPECT_TRUE(decide(f, pin()).count_reuse);
  f.reuse = ReuseVerdict::Wait;
  EXPECT_EQ(decide(f, pin()), path(CopyPath::Stage));
  f.staging_declined = Why::NoFreeBuffer;  // no buffer free: the driver's own path, and why
  EXPECT_EQ(decide(f, pin()), passed(Why::NoFreeBuffer));
}

// Each direction has its threshold (CUXFER_STAGE_MIN_H2D 8 MiB, _D2H 256 KiB
// by default); below it the app's call runs as made, registering or not.
TEST(CopyDecision, BelowTheStagingThresholdsTheCallIsLeftAsMade) {
  for (bool registering : {true, false}) {
    RewriteSettings s = pin();
    s.registering = registering;
    for (bool async : {false, true}) {
      CopyFacts h = copy(CopyWay::HtoD, 8 * MiB - 1, async);
      h.reuse = ReuseVerdict::Wait;
      h.stream = StreamState::Idle;
      EXPECT_EQ(decide(h, s), passed(Why::BelowThreshold)) << registering << async;
      h.bytes = 8 * MiB;
      EXPECT_EQ(decide(h, s), path(CopyPath::Stage)) << registering << async;
      CopyFacts d = copy(CopyWay::DtoH, 256 * KiB - 1, async);
      d.reuse = ReuseVerdict::Wait;
      EXPECT_EQ(decide(d, s), passed(Why::BelowThreshold)) << registering << async;
      d.bytes = 256 * KiB;
      EXPECT_EQ(decide(d, s), path(CopyPath::Stage)) << registering << async;
    }
  }
}

// Whatever the staging path said when it declined is what the call records.
TEST(CopyDecision, AStagingDeclineIsPassedOnAsTheReason) {
  const Why declines[] = {Why::NoFreeBuffer, Why::NoPool,       Why::PoolGoing,       Why::NoContext,
                          Why::RewriteDisabled, Why::ForkChild, Why::NoDriver,        Why::StagingFailed,
                          Why::StreamCapturing, Why::NotPageable, Why::NotHostDevice, Why::BelowThreshold};
  for (Why why : declines)
    for (bool registering : {true, false}) {
      RewriteSettings s = pin();
      s.registering = registering;
      CopyFacts f = copy(CopyWay::DtoH, 64 * MiB);
      f.reuse = ReuseVerdict::Never;
      f.staging_declined = why;
      EXPECT_EQ(decide(f, s), passed(why)) << trace::to_string(why) << " registering=" << registering;
    }
}

TEST(CopyDecision, SmallCopiesNeverCountTowardRegistration) {
  // The driver inlines them: pinned is no faster (FACTS.md, small-copy latency).
  CopyFacts f = copy(CopyWay::HtoD, 4 * KiB, /*async=*/true);
  CopyDecision d = decide(f, pin());
  EXPECT_FALSE(d.count_reuse);
  EXPECT_EQ(d, passed(Why::BelowThreshold));  // below the staging thresholds: the app's call, untouched
  f.registrations_exist = true;               // ... guarded if another site's registration may lie under it
  EXPECT_EQ(decide(f, pin()), passed(Why::BelowThreshold, Before::Release));
}

TEST(CopyDecision, ReusedRangeIsRegisteredThenCopiedInPlace) {
  CopyFacts f = copy(CopyWay::HtoD, 4 * MiB);
  f.reuse = ReuseVerdict::RegisterNow;
  EXPECT_EQ(decide(f, pin()), path(CopyPath::Original, Before::Register));
  f.cover = Cover::Covers;  // after the registration
  f.registrations_exist = true;
  EXPECT_EQ(decide(f, pin()), path(CopyPath::InPlace));
}

// Registration off the copying thread: the copy that proved the buffer
// reused is staged (always when async; from the thresholds when sync) while
// the registrar pins the range once the copy is done; staging declined, it
// registers inline.
TEST(CopyDecision, ReusedRangeIsRegisteredInTheBackgroundWhileThisCopyIsStaged) {
  RewriteSettings s = pin();
  s.register_in_background = true;
  CopyFacts big = copy(CopyWay::HtoD, 16 * MiB);
  big.reuse = ReuseVerdict::RegisterNow;
  EXPECT_EQ(decide(big, s), path(CopyPath::StageAny, Before::RegisterInBackground));
  CopyFacts small = copy(CopyWay::HtoD, 4 * MiB);  // below the 8 MiB H2D threshold: the app's own sync call
  small.reuse = ReuseVerdict::RegisterNow;
  EXPECT_EQ(decide(small, s), path(CopyPath::Original, Before::RegisterInBackground));
  CopyFacts async = copy(CopyWay::HtoD, 4 * MiB, /*async=*/true);
  async.reuse = ReuseVerdict::RegisterNow;
  EXPECT_TRUE(decide(async, s).need_stream);
  async.stream = StreamState::Idle;
  EXPECT_EQ(decide(async, s), path(CopyPath::StageAny, Before::RegisterInBackground));
  async.stream = StreamState::Capturing;
  EXPECT_NE(decide(async, s).before, Before::RegisterInBackground);
  CopyFacts declined = copy(CopyWay::DtoH, 4 * MiB);
  declined.reuse = ReuseVerdict::RegisterNow;
  declined.staging_declined = Why::NoFreeBuffer;
  EXPECT_EQ(decide(declined, s), path(CopyPath::Original, Before::Register));
  // A policy's "register" entry: in place from this copy on, as asked (inline).
  CopyFacts asked = copy(CopyWay::HtoD, 16 * MiB);
  asked.site_matched = true;
  asked.site_path = Path::Register;
  asked.reuse = ReuseVerdict::Wait;
  EXPECT_EQ(decide(asked, s), path(CopyPath::Original, Before::Register));
  // Then, being registered (Touches): staged; the pool declining, made pageable again.
  CopyFacts pending = copy(CopyWay::HtoD, 16 * MiB, /*async=*/true);
  pending.registrations_exist = true;
  pending.cover = Cover::Touches;
  EXPECT_EQ(decide(pending, s), path(CopyPath::StageAny));
  pending.staging_declined = Why::NoFreeBuffer;
  EXPECT_EQ(decide(pending, s), passed(Why::NoFreeBuffer, Before::Release));
  // This copy's own reservation (nothing in the driver yet): registered now,
  // then decided again (in place once it covers; else made pageable again).
  pending.reserved_here = true;
  EXPECT_EQ(decide(pending, s), path(CopyPath::Original, Before::RegisterReserved));
  pending.reserved_here = false;  // withdrawn meanwhile, or the registration failed
  pending.registration_failed = true;
  EXPECT_EQ(decide(pending, s), passed(Why::NoFreeBuffer, Before::Release));
  pending.cover = Cover::Covers;
  pending.registration_failed = false;
  pending.stream = StreamState::Idle;
  EXPECT_EQ(decide(pending, s), path(CopyPath::InPlace, Before::Nothing, /*wait=*/true));
}

TEST(CopyDecision, FailedRegistrationStages) {
  CopyFacts f = copy(CopyWay::DtoH, 4 * MiB);
  f.reuse = ReuseVerdict::RegisterNow;
  f.registration_failed = true;
  EXPECT_EQ(decide(f, pin()), path(CopyPath::Stage));
}

TEST(CopyDecision, LargeAsyncH2DCountsOnlyOnAnIdleStream) {
  CopyFacts f = copy(CopyWay::HtoD, 32 * MiB, /*async=*/true);
  EXPECT_TRUE(decide(f, pin()).need_stream);
  f.stream = StreamState::Busy;
  EXPECT_EQ(decide(f, pin()), path(CopyPath::Stage));
  f.stream = StreamState::Idle;
  EXPECT_TRUE(decide(f, pin()).count_reuse);
}

TEST(CopyDecision, NoRegistrationOnACapturedStream) {
  CopyFacts f = copy(CopyWay::DtoH, 4 * MiB, /*async=*/true);
  f.reuse = ReuseVerdict::RegisterNow;
  EXPECT_TRUE(decide(f, pin()).need_stream);
  f.stream = StreamState::Capturing;
  EXPECT_EQ(decide(f, pin()), path(CopyPath::Stage));
}

TEST(CopyDecision, SyncCopiesOnARegisteredRangeRunInPlace) {
  for (CopyWay w : {CopyWay::HtoD, CopyWay::DtoH})
    for (uint64_t n : {64 * KiB, MiB, 4 * MiB, 64 * MiB, 256 * MiB})
      EXPECT_EQ(decide(covered(w, n, false), pin()), path(CopyPath::InPlace)) << n;
}

// Issue 12, item 3: 4 KiB async H2D from a registered 1 MiB buffer took 10 us
// (a stream wait) against the driver's 2-3 us. Small async H2D bounce.
TEST(CopyDecision, SmallAsyncH2DOnARegisteredRangeBouncesWithoutAskingTheStream) {
  for (uint64_t n : {uint64_t{4}, 4 * KiB, 64 * KiB}) {
    CopyDecision d = decide(covered(CopyWay::HtoD, n, true), pin());
    EXPECT_EQ(d, path(CopyPath::StageAny)) << n;
  }
  // No bounce buffer free: DMA in place and wait, unless captured.
  CopyFacts f = covered(CopyWay::HtoD, 4 * KiB, true);
  f.staging_declined = Why::NoFreeBuffer;
  EXPECT_TRUE(decide(f, pin()).need_stream);
  f.stream = StreamState::Idle;
  EXPECT_EQ(decide(f, pin()), path(CopyPath::InPlace, Before::Nothing, true));
  f.stream = StreamState::Capturing;
  EXPECT_EQ(decide(f, pin()), passed(Why::StreamCapturing, Before::Release));
}

TEST(CopyDecision, LargeAsyncH2DOnARegisteredRange) {
  // Idle stream: the DMA in place returns sooner than a copy-out would.
  EXPECT_EQ(decide(covered(CopyWay::HtoD, 4 * MiB, true, StreamState::Idle), pin()),
            path(CopyPath::InPlace, Before::Nothing, true));
  // Busy stream: waiting would wait for the queued work too; copy it out.
  EXPECT_EQ(decide(covered(CopyWay::HtoD, MiB, true, StreamState::Busy), pin()), path(CopyPath::StageAny));
  EXPECT_EQ(decide(covered(CopyWay::HtoD, 256 * MiB, true, StreamState::Busy), pin()), path(CopyPath::StageAny));
  // Busy stream and the staging pool full: never wait for the stream; the
  // app's own call on pageable memory again.
  CopyFacts full = covered(CopyWay::HtoD, 4 * MiB, true, StreamState::Busy);
  full.staging_declined = Why::NoFreeBuffer;
  EXPECT_EQ(decide(full, pin()), passed(Why::NoFreeBuffer, Before::Release));
}

TEST(CopyDecision, AsyncD2HOnARegisteredRangeWaitsLikeThePageableOriginal) {
  for (StreamState st : {StreamState::Idle, StreamState::Busy})
    for (uint64_t n : {4 * KiB, 4 * MiB, 256 * MiB})
      EXPECT_EQ(decide(covered(CopyWay::DtoH, n, true, st), pin()), path(CopyPath::InPlace, Before::Nothing, true));
  EXPECT_EQ(decide(covered(CopyWay::DtoH, 4 * MiB, true, StreamState::Capturing), pin()),
            passed(Why::StreamCapturing, Before::Release));
}

// While another thread captures a graph in global mode, a sync that has to
// wait is refused and invalidates the capture: every copy leaves its stream
// as the app's own call would (gpu.capture_while_copying).
TEST(CopyDecision, BesideAGlobalCaptureCopiesLeaveTheStreamAsTheAppsCallWould) {
  for (CopyWay w : {CopyWay::HtoD, CopyWay::DtoH})
    for (bool async : {false, true})
      for (uint64_t n : {4 * KiB, MiB, 4 * MiB, 64 * MiB}) {
        CopyFacts f = copy(w, n, async);
        f.global_capture = true;
        f.registrations_exist = true;
        for (ReuseVerdict r : {ReuseVerdict::NotAsked, ReuseVerdict::RegisterNow}) {
          f.reuse = r;
          EXPECT_EQ(decide(f, pin()), passed(Why::GlobalCapture)) << n << " async=" << async;
        }
        CopyFacts c = covered(w, n, async);
        c.global_capture = true;
        EXPECT_EQ(decide(c, pin()), path(CopyPath::InPlace, Before::Nothing, /*wait=*/async)) << n;
        c.cover = Cover::Touches;
        EXPECT_EQ(decide(c, pin()), passed(Why::GlobalCapture, Before::Release)) << n;
      }
  // Below the rewrite's thresholds and with registration off alike.
  RewriteSettings s = pin();
  s.registering = false;
  CopyFacts f = copy(CopyWay::HtoD, 64 * MiB, true);
  f.global_capture = true;
  EXPECT_EQ(decide(f, s), passed(Why::GlobalCapture));
}

// Once the process has captured in global mode, a capture may open between
// an async copy and the app's sync: async copies are left as made; sync ones
// are still rewritten.
TEST(CopyDecision, AfterAGlobalCaptureAsyncCopiesAreLeftAsMade) {
  for (CopyWay w : {CopyWay::HtoD, CopyWay::DtoH})
    for (uint64_t n : {4 * KiB, 4 * MiB, 64 * MiB}) {
      CopyFacts f = copy(w, n, /*async=*/true);
      f.global_capture_seen = true;
      EXPECT_EQ(decide(f, pin()), passed(Why::AfterGlobalCapture)) << n;
      CopyFacts c = covered(w, n, /*async=*/true, StreamState::Idle);
      c.global_capture_seen = true;
      EXPECT_EQ(decide(c, pin()), passed(Why::AfterGlobalCapture, Before::Release)) << n;
      CopyFacts sync = covered(w, n, /*async=*/false);
      sync.global_capture_seen = true;
      EXPECT_EQ(decide(sync, pin()), path(CopyPath::InPlace)) << n;
    }
}

TEST(CopyDecision, PartlyRegisteredRangeIsStagedOrMadePageable) {
  CopyFacts f = copy(CopyWay::HtoD, MiB, true);
  f.registrations_exist = true;
  f.cover = Cover::Touches;
  EXPECT_EQ(decide(f, pin()), path(CopyPath::StageAny));
  f.staging_declined = Why::NoPool;
  EXPECT_EQ(decide(f, pin()), passed(Why::NoPool, Before::Release));
}

TEST(CopyDecision, RegisterOffOnlyStages) {
  RewriteSettings s = pin();
  s.registering = false;
  CopyFacts f = copy(CopyWay::DtoH, 64 * MiB);
  EXPECT_EQ(decide(f, s), path(CopyPath::Stage));
  f.staging_declined = Why::PoolGoing;
  EXPECT_EQ(decide(f, s), passed(Why::PoolGoing));
  // A policy's passthrough stays the app's call there too.
  f = copy(CopyWay::DtoH, 64 * MiB);
  f.site_matched = true;
  f.site_path = Path::Passthrough;
  EXPECT_EQ(decide(f, s), passed(Why::PolicyPassthrough));
}

TEST(CopyDecision, PolicyEntries) {
  RewriteSettings s = pin();
  CopyFacts f = copy(CopyWay::HtoD, 4 * KiB, true);
  f.site_matched = true;
  f.site_path = Path::Exclude;
  EXPECT_EQ(decide(f, s), passed(Why::PolicyExclude));
  f.site_path = Path::Stage;
  EXPECT_EQ(decide(f, s), path(CopyPath::StageAny));
  f.staging_declined = Why::NoFreeBuffer;
  EXPECT_EQ(decide(f, s), passed(Why::NoFreeBuffer));
  // register: counts even when small, and registers without waiting for reuse to pay.
  f = copy(CopyWay::HtoD, 4 * KiB);
  f.site_matched = true;
  f.site_path = Path::Register;
  EXPECT_TRUE(decide(f, s).count_reuse);
  f.reuse = ReuseVerdict::Wait;
  EXPECT_EQ(decide(f, s), path(CopyPath::Original, Before::Register));
  f.reuse = ReuseVerdict::Never;
  EXPECT_EQ(decide(f, s), path(CopyPath::StageAny));
  // passthrough: counted, never rewritten.
  f = copy(CopyWay::HtoD, 4 * MiB);
  f.site_matched = true;
  f.site_path = Path::Passthrough;
  EXPECT_TRUE(decide(f, s).count_reuse);
  f.reuse = ReuseVerdict::RegisterNow;
  EXPECT_EQ(decide(f, s), passed(Why::PolicyPassthrough));
}

// Every sweep cell ends in a path after a bounded number of steps, whatever
// the executor learns at each step.
TEST(CopyDecision, EverySweepCellSettles) {
  const uint64_t sizes[] = {4, 4 * KiB, 64 * KiB, MiB, 4 * MiB, 64 * MiB, 256 * MiB};
  for (CopyWay w : {CopyWay::HtoD, CopyWay::DtoH})
    for (bool async : {false, true})
      for (uint64_t n : sizes)
        for (StreamState st : {StreamState::Idle, StreamState::Busy, StreamState::Capturing})
          for (ReuseVerdict rv : {ReuseVerdict::Wait, ReuseVerdict::RegisterNow, ReuseVerdict::Never})
            for (bool declines : {false, true}) {
              CopyFacts f;
              f.bytes = n;
              f.async = async;
              int steps = 0;
              CopyDecision d;
              for (; steps < 8; ++steps) {
                d = decide(f, pin());
                if (d.need_classify) { f.way = w; f.host_kind = MemKind::Pageable; continue; }
                if (d.need_stream) { f.stream = st; continue; }
                if (d.count_reuse) { f.reuse = rv; continue; }
                if (d.before == Before::Register) {
                  f.cover = Cover::Covers;
                  f.registrations_exist = true;
                  continue;
                }
                if ((d.path == CopyPath::Stage || d.path == CopyPath::StageAny) && declines && !f.declined()) {
                  f.staging_declined = Why::NoFreeBuffer;
                  continue;
                }
                break;
              }
              ASSERT_LT(steps, 8) << n;
              // The app's call as made always says why; nothing else names a reason.
              if (d.path == CopyPath::Original)
                EXPECT_NE(d.reason, Why::None) << n << " bytes, declines=" << declines;
              else
                EXPECT_EQ(d.reason, Why::None) << n << " bytes, declines=" << declines;
              // A wait is only ever asked where the stream can be waited on.
              if (d.wait_after) {
                EXPECT_NE(f.stream, StreamState::Capturing);
                EXPECT_EQ(d.path, CopyPath::InPlace);
                // An async H2D returns once its source is consumed: it never
                // waits for the work queued ahead of it on a busy stream.
                EXPECT_FALSE(async && w == CopyWay::HtoD && f.stream == StreamState::Busy)
                    << n << " bytes, declines=" << declines;
              }
            }
}

}  // namespace
}  // namespace cuxfer::shim::rewrite
