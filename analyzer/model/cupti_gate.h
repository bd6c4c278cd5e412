// When a process's CUPTI copy records were on (the shim's governor,
// shim/record/cupti_governor.h), from its trace's CuptiGate changes, and what
// that means for its copies: which have GPU time, which could not have it
// because the records were off, and which lost a record that was due.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "trace/records.h"

namespace cuxfer::model {

class GateTimeline {
 public:
  GateTimeline() = default;
  // `changes` in any order; the records are on before the first.
  explicit GateTimeline(std::vector<trace::CuptiGateChange> changes);

  bool governed() const { return !changes_.empty(); }
  // On at every instant of [a, b]: a record issued then is due. An `on`
  // change exactly at `a` counts as on (it took effect before its time).
  bool on_throughout(uint64_t a, uint64_t b) const;
  // Nanoseconds of [a, b) with the records on.
  uint64_t on_ns(uint64_t a, uint64_t b) const;
  // Off at `t`, and why (the last change at or before it); on: nothing.
  std::optional<trace::GateReason> off_reason(uint64_t t) const;
  // Changes to on that were samples.
  uint32_t samples() const;
  size_t changes() const { return changes_.size(); }

 private:
  std::vector<trace::CuptiGateChange> changes_;  // by time
};

// One process's copies and memsets against its timeline.
struct GateStats {
  bool governed = false;
  uint32_t changes = 0, samples = 0;
  double on_share = 1.0;            // of the span from its first to its last copy
  uint64_t calls = 0;               // copies and memsets that did not fail (before any handover)
  uint64_t timed = 0;               // ... with GPU time
  uint64_t untimed_sync = 0;        // synchronous ones issued while the records were off
  uint64_t untimed_async = 0;       // asynchronous ones issued while the records were off
  uint64_t untimed_repeats = 0;     // ... of them, off because their call sites had been timed (Repeats)
};

}  // namespace cuxfer::model
