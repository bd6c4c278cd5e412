// When CUPTI's memcpy/memset records are worth what they cost (CUXFER_CUPTI=auto).
//
// A CUPTI memcpy record costs its call about 3.5 us on an H200 with warm
// caches (4-byte synchronous copy 5.9 -> 9.3 us, devtools/probe_cupti_cost.cpp)
// and 30-50 us a copy when the app evicts the caches between copies
// (bandwidthTest's pattern, docs/benchmarks.md). What a record tells:
//   - for an asynchronous copy, when its DMA ran: nothing else says so;
//   - for a synchronous copy, its DMA time, which the call's own CPU time
//     already bounds from above.
// So the records stay on while the app makes asynchronous copies, unless
// their rate would make them cost more than what is left of `max_share` once
// the shim's own work (measured in the hooks, record/hook_time.h) has taken
// its part: the share is the whole recording's, not CUPTI's alone (a PyTorch
// training loop: the shim ~0.8 % of a step, so the records get ~0.2 %, at
// least `min_record_share`, sampled accordingly); they go
// off after a few windows of synchronous copies only, and come back for one
// window in `sample_every` so that a report still has GPU times to compare
// with the calls' own. The writer thread runs govern() once per write cycle
// (~50 ms) on the copies it drained, and carries out what it says
// (recorder.cpp); each change is written to the trace (CuptiGate block) so
// the analyzer can tell a copy without GPU time because the records were off
// from one whose record went missing.
//
// Records off is not free: once CUPTI's activity API is in use, every call
// into the driver pays for it even with the memcpy records disabled, and
// nothing but cuptiFinalize takes that away (devtools/probe_cupti_cost.cpp,
// H200, 2026-12-02: an empty kernel's launch 3.62 -> 4.89 us, a 4-byte
// cudaMemcpyAsync 1.54 -> 2.65 us, a synchronous copy ~0.5-1.5 us; finalized:
// as without CUPTI). A training loop launches tens of kernels a step, so that
// is more than the shim's own work. So while the records are off the step
// also says when CUPTI may be detached: a window after they went off, in a
// window that issued no asynchronous copy (no copy made while the records
// were on can still be in flight; the CUPTI header asks for the work to be
// done and the buffers flushed before cuptiFinalize); or, where asynchronous
// copies keep coming and their records cost more than the budget,
// `async_detach_after` windows after they went off (a copy issued that long
// ago is done in any program that waits for its work now and then; one still
// in flight loses its record, which the report counts as missing, never as a
// time). The records are then off for at least `sample_every` - 1 windows, so
// that an attach (~12 ms on the writer thread) comes at most once in
// `sample_every` windows. Turning the records on again attaches CUPTI again.
//
// Samples back off while they find the same thing. A training loop makes the
// same copies step after step: the first samples give each of its copies GPU
// times, and every later one costs an attach, a detach and a window of
// records under every launch (~1 % of a PyTorch step by the in-process A/B,
// docs/benchmarks.md) to learn nothing new. So a sample whose window turns
// the records off for the reason they were off before it doubles the gap to
// the next one (19, 38, 76 ... windows, at most `max_off_windows`); anything
// else — asynchronous copies turning the records on, a sample that keeps them
// on, a window of synchronous copies only under a cost cap — starts again
// from `sample_every`. A pause (outside the capture range) keeps the gap.
//
// Records learn a call site's GPU times once; a loop repeats them. While the
// records are affordable, asynchronous copies keep them on only as long as
// they bring call sites the records have not timed yet: after
// `repeat_windows` windows in a row without a new one, the records go off
// (Repeats) and CUPTI is detached as under a cost cap, with samples on the
// backed-off schedule (a sample that finds only timed sites is one more
// doubling). A loop with a few large copies a step has affordable records,
// but CUPTI attached costs each of its kernel launches ~1.3 us, more than the
// records themselves, and the shim cannot see launches to weigh that; so
// without this rule default recording kept CUPTI attached for the whole run.
// Asynchronous copies from a call site never timed turn the records on again
// at once while CUPTI is still attached (within `async_detach_after` windows
// of going off); later, they restart the sample schedule from
// `sample_every`, so a program whose stacks keep changing attaches at most
// once in `sample_every` windows. The writer thread tells sites apart by
// their call-site id (the interned stack) and API.
//
// Copies off for their cost, for repeats or for being synchronous only are
// sampled only when there is something to learn (for synchronous copies the
// sample's price lands in the app: CUPTI's first record after an attach costs
// its copy 2-3 ms on an H100, bandwidthTest's 4 and 32 MiB loops lost a
// quarter of their figure to it): a sample comes at the end of its gap if
// a copy from a call site never timed came during it, or a window of
// synchronous copies only (the mix changed); otherwise it is
// skipped as a sample that found nothing new would be (one more doubling), up
// to the longest gap, whose sample is always taken. A training loop recorded
// from the middle (a capture range) thus pays one sample that times its call
// sites, then one a minute.
//
// Pure: the same state and window give the same step.
#pragma once

#include <cstdint>
#include <unordered_set>

#include "trace/records.h"

namespace cuxfer::shim {

struct GovernorSettings {
  uint64_t record_cost_ns = 3500;  // what one record adds to its call (warm caches; see above)
  double max_share = 0.01;         // the shim's work and the records together: at most this share of a window
  double min_record_share = 0.002; // the records' share never below this (some GPU times, however busy the shim)
  uint32_t sync_only_windows = 2;  // windows with copies, none asynchronous, before the records go off
  uint32_t sample_every = 20;      // off for synchronous copies: on again for one window in this many
  uint32_t max_off_windows = 1200; // the cost cap never keeps them off longer (~60 s at 50 ms windows)
  // Asynchronous copies over the budget: CUPTI may be detached this many
  // windows after the records went off, and they stay off at least
  // sample_every - 1 windows. 0: never detached while asynchronous copies
  // come (CUXFER_CUPTI_DETACH=0 too), the records cycling at the budget's duty.
  uint32_t async_detach_after = 2;
  // How many times samples that find the same thing may double the gap to
  // the next one (0: every sample_every windows, as long as the run lasts).
  uint32_t max_backoff = 6;
  // Windows in a row of affordable records that time no new call site
  // before they go off (Repeats). 0: never (records stay on while affordable).
  uint32_t repeat_windows = 3;
};

// The windows with copies between two samples after `backoff` doublings:
// (sample_every - 1) << backoff, at most max_off_windows.
uint32_t sample_gap(const GovernorSettings& k, uint32_t backoff);

struct CopyWindow {
  uint64_t ns = 0;           // how long the window lasted
  uint64_t sync_calls = 0;   // synchronous copies and memsets issued in it
  uint64_t async_calls = 0;  // asynchronous ones
  uint64_t shim_ns = 0;      // the shim's own work in the window's calls (an estimate from the timed ones)
  // Outside the capture range at the window's end (record/capture_range.h):
  // no copy is recorded, so none wants a record. Records that are on go off
  // (CUPTI is then detached the next window); what is off stays off, and the
  // time outside does not count toward the next sample.
  bool paused = false;
  // Call sites (stack and API) whose first copy with the records on is in
  // this window: what the records learnt. 0 for a steady program.
  uint64_t new_sites = 0;
  // Copies from call sites some record had timed before them (made with the
  // records off, or still on: the window after a change to off begins with
  // copies made before the change reached the hooks); the rest of an off
  // window's copies come from sites never timed. 0 (as for a window nobody
  // counted): all of them are new.
  uint64_t timed_calls = 0;
};

// The call sites (call-site id, API and kind, packed by the caller) some copy
// made with the records on has timed, and each window's copies counted
// against them into CopyWindow::new_sites and timed_calls. The writer thread's
// alone; cleared when a new driver session starts.
class TimedSites {
 public:
  // One copy or memset of the window from `site`, made with the records on
  // (`recorded`: it expects a GPU record) or off.
  void count(uint64_t site, bool recorded, CopyWindow& w) {
    if (recorded && sites_.insert(site).second) ++w.new_sites;
    else if (recorded || sites_.contains(site)) ++w.timed_calls;
  }
  void clear() { sites_.clear(); }
  size_t size() const { return sites_.size(); }

 private:
  std::unordered_set<uint64_t> sites_;
};


// What the records may cost in a window: max_share less the shim's own share, at least min_record_share.
double record_budget(const CopyWindow& w, const GovernorSettings& k);

struct GovernorState {
  bool on = true;
  trace::GateReason reason = trace::GateReason::Start;
  uint32_t sync_only_run = 0;  // consecutive windows with copies and no asynchronous one
  uint32_t off_left = 0;       // off: windows with copies still to pass before the next sample
  uint32_t off_run = 0;        // off: windows with copies passed since they went off
  uint32_t backoff = 0;        // doublings of the gap between samples (sample_gap)
  uint32_t repeat_run = 0;     // on: windows in a row with copies and no new call site
  bool unseen = false;         // off: a copy came from a call site no record has timed
  // Why the records were off before the last sample: a sample window that
  // turns them off for the same reason found nothing new.
  trace::GateReason sampled = trace::GateReason::Start;

  bool operator==(const GovernorState&) const = default;
};

struct GovernorStep {
  GovernorState next;
  bool changed = false;  // next.on differs from the state's: the records are to be turned on or off
  // Records off since an earlier window and none of this window's copies
  // asynchronous, or off for async_detach_after windows of a cost cap or of
  // repeats.
  bool may_detach = false;
};

GovernorStep govern(const GovernorState& s, const CopyWindow& w, const GovernorSettings& k);

}  // namespace cuxfer::shim
