// The call stack of a copy, at a few instructions a frame.
//
// libunwind's unw_backtrace costs about 870 instructions for a 16-frame stack
// (issue 13's storm, docs/benchmarks.md), most of it its generic cursor and
// cache. This walk keeps one rule per return address (eh_frame.h), found once
// and then read from a lock-free table, and steps a frame with two loads from
// the stack: the idea of the Linux kernel's ORC unwinder, with the rules taken
// from the code's own .eh_frame instead of a build step.
//
// Exact or nothing: a frame whose rule is not a simple one, a return address
// in code without a table, a stack that leaves the thread's own stack (a
// signal's alternate stack, a fiber's) or a full table make walk() return
// false, and the caller takes libunwind's stack instead. Every read is of the
// calling thread's stack, between its stack pointer and the stack's top.
//
// A library unloaded (dlclose) may leave rules for addresses that another one
// then occupies: after_dlclose() retires every rule at once (an epoch in each
// entry) when the loader says an object was unmapped; the dlclose hook calls it.
#pragma once

#include <cstdint>

#include "unwind/eh_frame.h"

namespace cuxfer::shim::unwind {

// The return addresses of the calling thread's stack, innermost first, leaving
// out those in [skip_low, skip_high) (the shim's own frames), at most `max`.
// `*count` gets how many; false when the walk cannot vouch for its result.
bool walk(uint64_t* frames, uint32_t max, uint64_t skip_low, uint64_t skip_high, uint32_t* count);

// The same walk, started at a hook's caller instead of at walk()'s own frame:
// `frame` is the hook's __builtin_frame_address(0), which holds the caller's
// rbp and, above it, `return_address` (a frame-pointer frame). The shim's own
// frames between the hook and the walk are not stepped: on a training step's
// cold caches, each was a rule (and a stack line) fetched for nothing.
// `return_address` is the first frame, unless it lies in the skipped range.
// A frame that is not such a frame on this thread's stack (the check reads
// the word above it) is walked from here instead, and counted.
bool walk_from(uint64_t return_address, const void* frame, uint64_t* frames, uint32_t max, uint64_t skip_low,
               uint64_t skip_high, uint32_t* count);

void after_dlclose();

// Allocates the rule table (512 KiB of zeroed pages, touched as used); false
// when it cannot be had (every walk then falls back). Call before walking.
bool init();

struct CacheStats {
  uint64_t rules = 0;      // return addresses with a rule
  uint64_t lookups = 0;    // rules looked up in the loaded objects' tables
  uint64_t full = 0;       // rules that found the table full
  uint64_t replays = 0;    // walks answered by the thread's last one (every thread's
                           // count to its last multiple of 1024, the caller's exactly)
  uint64_t unframed = 0;  // walk_from() calls whose frame was not one (walked from walk_from's own)
  uint64_t declines[kDeclineKinds] = {};  // walks declined, by reason
  uint64_t first_decline_pc = 0;          // the return address where the first one stopped
  Decline first_decline_why = Decline::None;
};
CacheStats cache_stats();

}  // namespace cuxfer::shim::unwind
