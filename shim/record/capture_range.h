// The capture range (CUXFER_CAPTURE_RANGE=cudaProfilerApi, `cuxfer record
// --capture-range=cudaProfilerApi`, as Nsight Systems spells it): only the
// calls made between the program's cudaProfilerStart()/cuProfilerStart() and
// the next cudaProfilerStop()/cuProfilerStop() are recorded. Outside, every
// call passes straight through (the allocation tables still follow the
// program's allocations, so a pointer is classified right once recording
// resumes), or, when the rewrite is on, is still rewritten but not recorded.
//
// This is the bookkeeping behind it: the ranges' count and length, and the
// trace note made of them at shutdown. Pure and unit-tested; the recorder
// holds one under its lock and mirrors "inside a range" in an atomic the
// hooks read.
#pragma once

#include <cstdint>
#include <string>

namespace cuxfer::shim {

class CaptureRanges {
 public:
  // Start and stop at time `t_ns`; a start inside a range and a stop outside
  // one change nothing (as the profiler API itself: "has no effect"; the
  // runtime's call reaches the driver's, so each arrives twice). Both return
  // whether the state changed.
  bool start(uint64_t t_ns);
  bool stop(uint64_t t_ns);
  bool inside() const { return open_; }

  uint32_t ranges() const { return ranges_; }
  // Time inside ranges up to `now_ns` (an open range counts up to it).
  uint64_t captured_ns(uint64_t now_ns) const;

  // The trace note at shutdown ("capture range: ..."). `recorded_ns`: the
  // whole session's length; `rewriting`: calls outside were still rewritten.
  std::string note(uint64_t now_ns, uint64_t recorded_ns, bool rewriting) const;

 private:
  bool open_ = false;
  uint64_t open_since_ = 0;
  uint64_t closed_ns_ = 0;  // the finished ranges' time
  uint32_t ranges_ = 0;
};

}  // namespace cuxfer::shim
