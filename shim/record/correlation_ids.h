// The shim's correlation ids (trace::Event::correlation_id): unique in the
// process, never 0 (0 is "unknown" in the trace). Each thread takes them in
// blocks from one shared counter, so that a copy call's id is a thread-local
// increment: a locked add on the shared counter per call is a full fence,
// which makes the hook wait there for the cache misses of its first steps
// instead of letting them overlap the rest of its work (with the interpreter
// gate's change, 0.5-1.1 points off the H200's pinned copy storm,
// docs/benchmarks.md "Sixteenth session"). Ids are increasing per thread, unique
// but not ordered across threads; nothing relies on more (the analyzer joins
// by id, orders by time).
#pragma once

#include <atomic>
#include <cstdint>

#include "core/export.h"

namespace cuxfer::shim {

// A thread's current block: ids [next, next + left).
struct CorrelationBlock {
  uint32_t next = 0;
  uint32_t left = 0;
};

class CorrelationIds {
 public:
  static constexpr uint32_t kBlock = 64;

  CorrelationIds() = default;
  // A source whose next block starts after `last` (tests: the counter's wrap).
  explicit CorrelationIds(uint32_t last) : last_(last) {}

  CUXFER_INLINE uint32_t next(CorrelationBlock& b) {
    if (b.left == 0) [[unlikely]] refill(b);
    --b.left;
    return b.next++;
  }

 private:
  void refill(CorrelationBlock& b) {
    b.next = last_.fetch_add(kBlock, std::memory_order_relaxed) + 1;
    b.left = kBlock;
    // After 2^32 ids the counter wraps: a block that holds 0 ends before it
    // (0 can only be a block's last id, the counter moving in whole blocks
    // from 0), and one that starts at 0 begins at 1.
    if (b.next == 0) {
      b.next = 1;
      --b.left;
    } else if (static_cast<uint32_t>(b.next + kBlock - 1) == 0) {
      --b.left;
    }
  }

  std::atomic<uint32_t> last_{0};
};

}  // namespace cuxfer::shim
