#include "record/cupti_governor.h"

#include <algorithm>

namespace cuxfer::shim {

using trace::GateReason;

namespace {

GovernorStep turn(const GovernorState& s, bool on, GateReason why, uint32_t off_left) {
  GovernorStep st;
  st.next = s;
  st.next.on = on;
  st.next.reason = why;
  st.next.sync_only_run = 0;
  st.next.off_left = on ? 0 : off_left;
  st.next.off_run = 0;
  st.next.repeat_run = 0;
  st.next.unseen = false;
  st.changed = on != s.on;
  return st;
}

// Off after a sample window for `why`: the same reason the records were off
// before it, one more doubling; another reason, none.
uint32_t next_backoff(const GovernorState& s, GateReason why, const GovernorSettings& k) {
  if (s.reason != GateReason::Sample || s.sampled != why) return 0;
  return std::min(s.backoff + 1, k.max_backoff);
}

// Something changed while the records were off: the gap backs off no
// longer, and what is left of it is cut to the undoubled one's.
void restart_gap(GovernorState& next, const GovernorState& s, const GovernorSettings& k) {
  const uint32_t base = sample_gap(k, 0);
  next.backoff = 0;
  next.off_left = std::min(next.off_left, s.off_run < base ? base - s.off_run : 1);
}

}  // namespace

uint32_t sample_gap(const GovernorSettings& k, uint32_t backoff) {
  const uint64_t base = std::max<uint32_t>(1, k.sample_every) - 1;
  const uint64_t gap = base << std::min<uint32_t>(backoff, 20);
  return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(gap, k.max_off_windows)));
}

double record_budget(const CopyWindow& w, const GovernorSettings& k) {
  const double shim = static_cast<double>(w.shim_ns) / static_cast<double>(std::max<uint64_t>(w.ns, 1));
  return std::max(k.min_record_share, k.max_share - shim);
}

GovernorStep govern(const GovernorState& s, const CopyWindow& w, const GovernorSettings& k) {
  const uint64_t calls = w.sync_calls + w.async_calls;
  if (w.paused && s.on) return turn(s, false, GateReason::Paused, sample_gap(k, s.backoff));
  if (calls == 0) {  // nothing ran: nothing learnt, no window counted
    GovernorStep st{s, false};
    st.may_detach = !s.on;
    return st;
  }
  if (s.on) {
    // On-windows in a row that timed no new call site, this one included.
    const uint32_t repeats = w.new_sites > 0 ? 0 : s.repeat_run + 1;
    // What the records cost in this window, as a share of it, against what
    // the shim's own work leaves of the recording's share.
    const double share = static_cast<double>(calls) * static_cast<double>(k.record_cost_ns) /
                         static_cast<double>(std::max<uint64_t>(w.ns, 1));
    const double budget = record_budget(w, k);
    if (share > budget) {
      // Off for as many windows as keep the average at the budget: on one
      // window in ceil(share / budget).
      const double windows = share / budget;
      uint32_t off = windows >= k.max_off_windows ? k.max_off_windows
                                                  : std::max<uint32_t>(1, static_cast<uint32_t>(windows + 0.999) - 1);
      // Synchronous copies only: they need no records at all (their CPU time
      // bounds their DMA), so they stay off at least as long as the sync-only
      // rule keeps them off. Otherwise a slow shim (little budget left) and a
      // modest copy rate put them on every other window: toggled each time,
      // and never off long enough for CUPTI to be detached.
      if (w.async_calls == 0) {
        const uint32_t b = next_backoff(s, GateReason::SyncOnly, k);
        if (sample_gap(k, b) > off) {
          GovernorStep st = turn(s, false, GateReason::SyncOnly, sample_gap(k, b));
          st.next.backoff = b;
          return st;
        }
      }
      // Asynchronous copies: off long enough for CUPTI to be detached in
      // between and attached again at most once in sample_every windows
      // (fewer once samples keep finding the same).
      // A window that timed a call site for the first time found something: no doubling.
      const uint32_t b = w.new_sites > 0 ? 0 : next_backoff(s, GateReason::CostCap, k);
      if (w.async_calls > 0 && k.async_detach_after > 0) off = std::max(off, sample_gap(k, b));
      GovernorStep st = turn(s, false, GateReason::CostCap, off);
      st.next.backoff = b;
      return st;
    }
    if (w.async_calls > 0) {
      // Affordable. A window that times no new call site is a repeat: a
      // sample has done its job at once (one more doubling: it found only
      // what earlier records timed), a run of repeat_windows turns them off.
      if (k.repeat_windows > 0 && w.new_sites == 0 &&
          (s.reason == GateReason::Sample || repeats >= k.repeat_windows)) {
        const uint32_t b = s.reason == GateReason::Sample ? std::min(s.backoff + 1, k.max_backoff) : s.backoff;
        GovernorStep st = turn(s, false, GateReason::Repeats, sample_gap(k, b));
        st.next.backoff = b;
        return st;
      }
      GovernorStep st{s, false};
      st.next.sync_only_run = 0;
      st.next.repeat_run = repeats;
      // Records affordable and timing something new: the next cost cap samples from the start.
      if (w.new_sites > 0 || k.repeat_windows == 0) st.next.backoff = 0;
      if (st.next.reason == GateReason::Sample || st.next.reason == GateReason::SyncOnly)
        st.next.reason = GateReason::AsyncCopies;
      return st;
    }
    // Synchronous copies only. A sample window has done its job at once.
    const uint32_t run = s.sync_only_run + 1;
    if (s.reason == GateReason::Sample || run >= k.sync_only_windows) {
      const uint32_t b = next_backoff(s, GateReason::SyncOnly, k);
      GovernorStep st = turn(s, false, GateReason::SyncOnly, sample_gap(k, b));
      st.next.backoff = b;
      return st;
    }
    GovernorStep st{s, false};
    st.next.sync_only_run = run;
    st.next.repeat_run = repeats;
    return st;
  }
  // Off. Asynchronous copies want their records back at once, unless the
  // records are off because of what they cost, or went off at a pause (a
  // program that pauses between steps would attach CUPTI at every resume:
  // the next sample comes on the usual schedule instead).
  if (w.async_calls > 0 && s.reason != GateReason::CostCap && s.reason != GateReason::Paused &&
      s.reason != GateReason::Repeats) {
    GovernorStep st = turn(s, true, GateReason::AsyncCopies, 0);
    st.next.backoff = 0;
    return st;
  }
  GovernorState next = s;
  const bool unseen = calls > w.timed_calls;  // a copy from a call site never timed
  if (s.reason == GateReason::Repeats && unseen) {
    // Copies from a call site never timed: records at once while CUPTI is
    // still attached (asynchronous ones: nothing else times them); once it
    // is detached, the sample schedule starts again from sample_every.
    if (w.async_calls > 0 && s.off_run < k.async_detach_after) {
      GovernorStep st = turn(s, true, GateReason::AsyncCopies, 0);
      st.next.backoff = 0;
      return st;
    }
    restart_gap(next, s, k);
  }
  if (w.async_calls == 0 && s.reason == GateReason::CostCap) {
    // Synchronous copies only under a cost cap: the mix changed, so the next
    // sample is taken, not skipped, and the gap starts again.
    next.unseen = true;
    if (s.backoff > 0) restart_gap(next, s, k);
  }
  // Synchronous copies only: the repeating asynchronous ones are gone, so
  // they are off for being synchronous now, and asynchronous copies coming
  // back turn them on at once, as after any sync-only stretch.
  if (s.reason == GateReason::Repeats && w.async_calls == 0) next.reason = GateReason::SyncOnly;
  if (unseen) next.unseen = true;
  const bool async_off = next.reason == GateReason::CostCap || next.reason == GateReason::Repeats;
  const bool skippable = async_off || next.reason == GateReason::SyncOnly;
  if (next.off_left <= 1 && skippable && !next.unseen && sample_gap(k, next.backoff) < k.max_off_windows &&
      next.backoff < k.max_backoff) {
    // The gap is over, and every copy in it came from a call site the
    // records have timed: a sample would time them again, for an attach, a
    // detach (and for asynchronous copies async_detach_after windows of
    // CUPTI under every launch; for synchronous ones, the first record after
    // the attach, 2-3 ms inside an app's copy on an H100). It is skipped as
    // if it had found nothing new (one more doubling); the longest gap's
    // sample is always taken, to see what drifts.
    ++next.backoff;
    next.off_left = sample_gap(k, next.backoff) + 1;
  }
  if (next.off_left > 1) {
    GovernorStep st{next, false};
    --st.next.off_left;
    if (st.next.off_run < UINT32_MAX) ++st.next.off_run;
    st.may_detach = w.async_calls == 0 ||
                    (k.async_detach_after > 0 && (s.reason == GateReason::CostCap || s.reason == GateReason::Repeats) &&
                     st.next.off_run >= k.async_detach_after);
    return st;
  }
  // The sample: what it finds is compared with why the records were off
  // (across a pause, with why they were off before it).
  GovernorStep st = turn(next, true, GateReason::Sample, 0);
  st.next.sampled = s.reason == GateReason::Paused ? s.sampled : s.reason;
  return st;
}

}  // namespace cuxfer::shim
