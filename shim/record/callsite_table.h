// Deduplicates call stacks into small integer ids. Lock-free: an app thread
// that meets a new stack claims an empty slot with one CAS; a known stack is
// a hash probe and a compare. The writer thread emits each new stack once.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/publish_order.h"
#include "trace/records.h"
#include "unwind/fast_unwind.h"

namespace cuxfer::shim {

class CallSiteTable {
 public:
  static constexpr uint32_t kCapacity = 8192;
  // Native frames (CUXFER_STACK_DEPTH, at most 32) and then Python frames.
  static constexpr uint32_t kMaxNativeDepth = 32;
  static constexpr uint32_t kMaxDepth = 64;

  CallSiteTable();
  // Id (>= 1) of this stack, or 0 when the table is full (counted as dropped).
  uint32_t intern(const uint64_t* frames, uint32_t depth);
  // The stack of id (valid forever: entries are never reused); null when unknown.
  const uint64_t* frames(uint32_t id, uint32_t* depth) const {
    if (!entries_ || id == 0 || id > kCapacity) return nullptr;
    const Entry& e = entries_[id - 1];
    if (e.state.load(std::memory_order_acquire) != 2) return nullptr;
    *depth = e.depth;
    return e.frames;
  }
  // Writer thread: stacks not yet emitted.
  void collect_new(std::vector<trace::CallSite>& out);
  // Fork child: its new trace file needs every stack again.
  void mark_all_unwritten();
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::atomic<uint32_t> state;  // 0 empty, 1 being filled, 2 ready
    uint32_t depth;
    uint64_t hash;
    uint64_t frames[kMaxDepth];
  };
  Entry* entries_;  // zeroed pages, touched only when used
  PublishOrder ready_{kCapacity};  // ids in the order their stacks became ready
  std::atomic<uint64_t> dropped_{0};
};

// Fills `frames` with the caller's return addresses (innermost first), leaving
// out the shim's own frames; `fallback` is used when depth is 0 or unwinding
// finds nothing. With `frame`, the frame address of the hook that `fallback`
// returns to, the walk starts there (unwind::walk_from). Returns the number
// of frames.
uint32_t capture_stack(uint64_t* frames, uint32_t max_depth, void* fallback, const void* frame = nullptr);

// The address range of libcuxfer itself, so captured stacks skip our frames.
void init_own_text_range();

// Chooses the unwinders: the .eh_frame walk (unwind/fast_unwind.h, a few
// instructions a frame) unless CUXFER_UNWINDER=libunwind, and for the stacks
// it cannot vouch for libunwind's unw_backtrace when libunwind.so.8 can be
// loaded (about 50 instructions a frame), else glibc's backtrace (about
// 100-300 ns a frame). libunwind is loaded RTLD_LOCAL so that its _Unwind_*
// definitions never replace the process's own exception unwinder. Returns a
// line saying which are used. Call once, before the first capture_stack.
std::string init_stack_capture();

// A line for the trace's notes: how many stacks each unwinder took (and, for
// CUXFER_UNWINDER=verify, how many differed); empty under libunwind alone.
std::string unwinder_summary();

// The part of that line that says why the walk declined: " (N at <reason>,
// ...; the first at <object>+<offset> in <function>: <reason>)", the three
// most frequent reasons; empty when it never declined.
std::string decline_summary(const unwind::CacheStats& c);

}  // namespace cuxfer::shim
