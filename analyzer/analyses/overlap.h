// Copy/compute overlap from CUPTI kernel records (`cuxfer record --kernels`):
// each copy's time measured against the kernel busy time of its device
// (the Overlap table and the finding "sync_copy_idle"), summed into the
// tally (OverlapTally, FindingsTally::sync_idle_sites) so that a report of
// traces read whole, one streamed and one of summaries make both parts from
// the same sums.
//
// KernelOverlapFeed takes one process's kernel records and copies in any
// order a trace holds them and answers each copy's question (how much of
// [begin, end) ran under kernels) once no kernel record still to come can
// start before its end: the records wait in a heap, per device, until
// `kernel_lag` wait, and the earliest is placed then (the watermark: none
// still to come may start before it). Placed kernels are kept as a sorted
// disjoint union, dropped from the front once every waiting copy starts
// after them. Exact or nothing: a kernel record that starts before the
// watermark (a copy may already be answered without it), or a copy that
// starts before kernels already dropped, makes it inexact(), and the caller
// reads the trace whole, said in one line (as model::StreamedGpuJoin does).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "analyzer/analyses/tally.h"

namespace cuxfer::analyses {

// The process recorded kernels (its trace's note): only then are its copies
// measured against them.
bool kernels_recorded(const model::Process& p);

// Of one device of one process: its kernel records (those that end after
// they start) and the first start and last end among them. sync_copy_idle
// counts only copies between the two, so a streamed report finds them in
// its first pass, before the copies are measured.
struct KernelExtent {
  uint64_t kernels = 0, first = UINT64_MAX, last = 0;
};
using KernelExtents = std::map<uint32_t, KernelExtent>;  // by device
void add_kernel_extents(KernelExtents& x, std::span<const trace::GpuRecord> records);

// KernelOverlapFeed's bounds, per device.
// A CUPTI buffer holds its records in completion order: their starts are out
// of order by about the kernels that ran at once, far fewer than the lag.
// Memory per device: 16 bytes a kernel waiting or kept, 40 a copy waiting
// (about 3.5 MiB at most, as long as the copies wait for no more kernels
// than max_kernels).
struct KernelOverlapWindow {
  size_t kernel_lag = size_t{1} << 14;          // kernel records waiting before the earliest is placed
  size_t max_waiting_copies = size_t{1} << 16;  // past it the watermark moves to answer the earliest half
  size_t keep_kernels = size_t{1} << 14;        // placed intervals kept for copies still to come
  size_t max_kernels = size_t{1} << 20;         // placed intervals waiting copies hold: past it, inexact
  // Devices of one process with kernel records or copies: a real process has
  // a few (16 on the largest nodes); a damaged trace's device ids are not
  // given each its own window.
  size_t max_devices = 64;
};

class KernelOverlapFeed {
 public:
  using Window = KernelOverlapWindow;
  // Every limit off: what a job that holds its events uses (nothing is let go).
  static Window unbounded() { return {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX}; }

  // `extents`: the process's (add_kernel_extents over all its records).
  KernelOverlapFeed(uint32_t pid, KernelExtents extents, Window w = {});
  void add_kernels(std::span<const trace::GpuRecord> records);
  // The process's app calls; only successful copies on a device count.
  void add_copies(std::span<const model::Call> calls);
  void add_copy(const model::Call& c);
  // Every kernel record was given: each waiting copy is answered, and copies
  // given from now on are answered as they come.
  void finish_kernels();

  enum class Inexact : uint8_t {
    No,
    KernelLate,   // a kernel record starts before the watermark
    CopyLate,     // a copy starts before kernels already let go
    HeldKernels,  // more placed kernels than max_kernels that waiting copies need
    ManyDevices,  // more devices than max_devices
  };
  bool inexact() const { return why_ != Inexact::No; }
  Inexact why_inexact() const { return why_; }

  // The sums after finish_kernels and the last copy: the process's devices
  // appended to `devices` (device order), each sync_copy_idle call site's
  // copies added to `sites` (by site id: Call::site + 1, 0 = none).
  void take(std::vector<DeviceOverlap>& devices, std::vector<FindingsTally::SiteSum>& sites) const;

 private:
  using Interval = std::pair<uint64_t, uint64_t>;
  // A copy's question: how much of [begin, end) kernels covered.
  struct Question {
    uint64_t begin, end;
    uint64_t ns;      // its GPU time (dma) or CPU-blocked time (sync)
    uint64_t bytes;
    uint32_t site_id;
    bool cpu;         // the sync_copy_idle question; else dma_under_kernels
  };
  struct Device {
    DeviceOverlap out;
    KernelExtent extent;
    std::vector<Interval> waiting_kernels;  // min-heap by start
    std::deque<Interval> busy;              // placed kernels, a sorted disjoint union
    uint64_t watermark = 0;                 // no kernel record still to come starts before it
    uint64_t dropped_begin = UINT64_MAX, dropped_end = 0;  // the span of the intervals let go
    uint64_t dropped_ns = 0;                // their time
    size_t let_go_at = 0;                   // busy's size at which to try letting go again
    std::vector<Question> questions;        // waiting, in the order they came
    size_t sweep_at = 0;                    // questions' size at which to answer those ready
  };
  Device& device(uint32_t d);
  void place_next(Device& d);
  void push_watermark(Device& d, uint64_t to);
  void answer_ready(Device& d);
  void sweep(Device& d);
  void answer(Device& d, const Question& q);
  void let_go(Device& d);
  void ask(Device& d, const Question& q);
  uint64_t covered(const Device& d, uint64_t b, uint64_t e) const;
  void give_up(Inexact why) {
    if (why_ == Inexact::No) why_ = why;
  }

  uint32_t pid_;
  KernelExtents extents_;
  Window window_;
  std::map<uint32_t, Device> devices_;
  uint32_t last_device_ = UINT32_MAX;
  Device* last_ = nullptr;
  std::vector<FindingsTally::SiteSum> sites_;
  Inexact why_ = Inexact::No;
};

// The one line a process whose kernel records could not be measured in the
// window gets (the report is then made holding the events).
std::string kernel_window_reason(KernelOverlapFeed::Inexact why);

// The overlap sums of a job that holds its events and GPU records (every
// process with kernel records), into the tally: tally_calls' last step.
void tally_overlap(const model::Job& job, JobTally& tally);

// The report's parts from the tally's sums (the same on every path).
Overlap overlap_of(const JobTally& tally);
std::vector<Finding> find_sync_copy_idle(const JobTally& tally);

}  // namespace cuxfer::analyses
