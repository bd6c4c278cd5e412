// NVTX ranges (issue 15): which push/pop ranges each thread has open, so that
// every copy carries the range stack it ran in.
//
// The shim takes part as NVTX's injection library (interpose/nvtx_injection.cpp;
// `cuxfer record` sets NVTX_INJECTION64_PATH to libcuxfer.so). A push or pop
// only changes the thread's own shadow stack (ThreadState::nvtx_*) and marks
// it changed: no clock, no event, no lock once a name has been seen on the
// thread. The next event the thread records is preceded by one
// EventKind::NvtxRanges event naming the stack it runs in (trace/event.h), so
// ranges that hold no copy cost the trace nothing and copies outside ranges
// pay one flag test. Names are interned (NvtxNames blocks) and stacks too
// (NvtxStacks blocks), each written once.
//
// Why injection and not CUPTI's NVTX callbacks: CUPTI is detached whenever its
// copy records are off (record/cupti_governor.h), is taken over by the app's
// own profiler, and allows one subscriber; the injection interface needs
// none of that, and chains to another NVTX tool named before us
// (CUXFER_NVTX_NEXT, set by `cuxfer record` from an NVTX_INJECTION64_PATH the
// environment already had).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/ranked_lock.h"
#include "record/callsite_table.h"
#include "record/recorder.h"
#include "trace/records.h"

namespace cuxfer::shim {

class NvtxRanges {
 public:
  static NvtxRanges& instance();

  // A domain created by the app (nvtxDomainCreateA/W): its id (>= 1); 0 is
  // NVTX's default domain.
  uint32_t domain(const char* name);
  // The id (>= 1) of `message` in `domain`; 0 when the shim's memory ran out.
  uint32_t name(uint32_t domain, const char* message, size_t length);
  // A registered string (nvtxDomainRegisterStringA/W): interned like a name,
  // its handle is the id.
  uint32_t registered(uint32_t domain, const char* message, size_t length) { return name(domain, message, length); }

  // The thread's stack. push returns the depth before the push (NVTX's
  // "zero-based level of the range being started"); pop the depth after it,
  // or -1 when no range was open (an unbalanced pop: counted, nothing else).
  int push(ThreadState& ts, uint32_t name_id);
  int pop(ThreadState& ts);

  // The thread's current stack as an interned id (0: none open).
  uint32_t stack_id(const ThreadState& ts);

  // Writer thread: names and stacks not yet written.
  void collect_new(std::vector<trace::NvtxName>& names, std::vector<trace::CallSite>& stacks);
  // Fork child: its new trace needs every name and stack again.
  void mark_all_unwritten();
  // Held across fork(): a thread interning a name must not leave the lock
  // taken in the child.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }
  uint64_t unbalanced_pops() const { return unbalanced_pops_.load(std::memory_order_relaxed); }
  uint64_t deepest() const { return deepest_.load(std::memory_order_relaxed); }
  bool used() const { return used_.load(std::memory_order_relaxed); }

 private:
  NvtxRanges() = default;
  uint32_t intern_slow(uint32_t domain, const char* message, size_t length, uint64_t hash);

  RankedMutex mutex_{LockRank::kNvtxNames};  // names and domains; taken only for a name a thread has not met before
  std::unordered_map<std::string, uint32_t> ids_;  // domain id + '\0' + message -> name id
  std::vector<trace::NvtxName> names_;             // by id - 1
  size_t names_written_ = 0;
  std::vector<std::string> domains_;               // by domain id - 1
  CallSiteTable stacks_;                           // range stacks: name ids, outermost first
  std::atomic<uint64_t> unbalanced_pops_{0};
  std::atomic<uint64_t> deepest_{0};
  std::atomic<bool> used_{false};
};

}  // namespace cuxfer::shim
