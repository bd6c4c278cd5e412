// What a hook learns about a call from its arguments alone, before anything
// is classified. Classification (which kind of memory each pointer is) is done
// once, when the user call ends, by the hook that owns the event.
#pragma once

#include <cstdint>

#include "trace/event.h"

namespace cuxfer::shim {

struct CallDesc {
  trace::EventKind kind = trace::EventKind::Copy;
  trace::Direction direction = trace::Direction::Unknown;  // Unknown: derive from the pointers
  uint64_t src = 0;
  uint64_t dst = 0;
  trace::MemKind src_preset = trace::MemKind::Unknown;  // set when the API fixes it (arrays)
  trace::MemKind dst_preset = trace::MemKind::Unknown;
  // Device ordinals when the API names them (cudaMemcpyPeer); -1: from the pointers.
  int8_t src_device = -1, dst_device = -1;
  uint64_t bytes = 0;
  uint64_t stream = 0;
  uint8_t flags = 0;  // trace::EventFlags known from the API (async, per-thread stream)
};

}  // namespace cuxfer::shim
