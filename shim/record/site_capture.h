// What a recorded call's site is made of: decided once a call, from what the
// call is and how the shim was configured (capture_callsite executes it).
#pragma once

#include <cstdint>

#include "trace/event.h"

namespace cuxfer::shim {

enum class SiteCapture : uint8_t {
  Caller,  // the hook's return address alone (one frame): no walk
  Stack,   // the native walk, with the thread's Python frames where it has them
};

// Copies, allocations and registrations get the whole stack: they are what the
// report, the findings, policies and `cuxfer tune` attribute to a line.
// Memsets move no host data; the report counts them but names no site for
// them, so by default they keep the calling function only. On a PyTorch
// training step cuBLAS's two memsets are two of the five calls, and a stack
// capture is about half of what a recorded call costs with the caches cold
// (docs/benchmarks.md, twentieth session). CUXFER_MEMSET_STACKS=1 walks them
// too (their sites in `cuxfer export`'s Perfetto trace then show the
// Python line). stack_depth 0 (--no-stacks): the caller for every call.
constexpr SiteCapture site_capture(trace::EventKind kind, uint32_t stack_depth, bool memset_stacks) noexcept {
  if (stack_depth == 0) return SiteCapture::Caller;
  if (kind == trace::EventKind::Memset && !memset_stacks) return SiteCapture::Caller;
  return SiteCapture::Stack;
}

}  // namespace cuxfer::shim
