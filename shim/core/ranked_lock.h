// The shim's locks, each with a rank in one order (DESIGN principle 12;
// docs/architecture.md, "Lock order"): a thread takes a lock only while every
// lock it already holds has a lower rank, and the fork handlers take them in
// rank order. The libc hooks (libcuxfer_memhooks.so) take kHostRanges inside
// the app's malloc, free and mmap, so the shim may allocate or free memory
// while it holds a lock ranked below kHostRanges, never while it holds one at
// or above it.
//
// With CUXFER_LOCK_ORDER_CHECK (a CMake option, on in the test build) every
// acquisition is checked, lockdep-like: each thread keeps the ranks it holds
// on a small stack, and taking a rank not above its top aborts with a message
// that names both locks. The libc hooks check the same way on entry, as if
// taking kHostRanges, whatever the size (a small allocation takes no lock
// there, a large one would). Without the option a RankedMutex is a std::mutex.
#pragma once

#include <cstdint>
#include <mutex>

namespace cuxfer::shim {

// Outermost first. Gaps leave room; only the order matters.
enum class LockRank : uint8_t {
  kRecorderSession = 10,     // Recorder::session_mutex_: the writer's; across CUDA/CUPTI calls, allocates
  kRecorderCapture = 15,     // Recorder::capture_mutex_: profiler-API capture ranges
  kCuptiHandover = 20,       // CuptiCollector::handover_mutex_: across CUPTI's attach, detach and flush
  kZeroCopyContextsGone = 22,  // zero_copy: publishing a context that went, and a thread's
                               // event destroyed unless its context went (across cuEventDestroy)
  kCuptiRecords = 25,        // CuptiCollector::mutex_: records handed over by CUPTI's buffer callback
  kRecorderWake = 30,        // Recorder::wake_mutex_: the writer's sleep
  kSitePolicyBind = 35,      // site_policy: binding a policy to the loaded modules
  kZeroCopyBuffers = 40,     // zero_copy: the mapped host buffers
  kZeroCopyStreams = 42,     // zero_copy: the app's blocking streams
  kParallelMemcpySubmit = 45,  // ParallelMemcpy: one job at a time
  kParallelMemcpyWake = 47,    // ParallelMemcpy: its workers' sleep
  kStagingContexts = 48,     // staging: making and giving back the contexts' pools (pool locks under it)
  kStagingPool = 50,         // staging: the pool's buffers
  kBackgroundRegistrar = 52, // background_registrar: its queue (a leaf but for the driver-free wait)
  kVmmMappings = 55,         // driver_memory_hooks: cuMemMap'd ranges
  kDriverLoading = 60,       // driver_calls: the rewrite's driver table, made once (dlopen)
  kNvtxNames = 65,           // NvtxRanges: interned names and domains
  kPythonNotes = 70,         // PythonStacks: notes handed to the writer
  kHostRanges = 80,          // host_ranges(): taken by the libc hooks, inside the app's malloc/free/mmap
  kAllocationTable = 85,     // allocation_table(): a leaf (fixed arrays, never allocates)
  kRegistrationWriters = 90, // RegistrationCache's writers' word: a leaf (a few stores)
};

namespace lock_order {
#ifdef CUXFER_LOCK_ORDER_CHECK
inline constexpr bool kChecked = true;
// Aborts, naming both locks, unless every rank this thread holds is below `rank`.
void check(LockRank rank, const char* what);
void held(LockRank rank);      // `rank` is now held (after check)
void released(LockRank rank);  // `rank` is no longer held
#else
inline constexpr bool kChecked = false;
inline void check(LockRank, const char*) {}
inline void held(LockRank) {}
inline void released(LockRank) {}
#endif
}  // namespace lock_order

// A std::mutex with its rank (BasicLockable and Lockable: std::lock_guard
// and std::unique_lock take it).
class RankedMutex {
 public:
  constexpr explicit RankedMutex(LockRank rank) : rank_(rank) {}
  RankedMutex(const RankedMutex&) = delete;
  RankedMutex& operator=(const RankedMutex&) = delete;

  void lock() {
    lock_order::check(rank_, "lock");
    mutex_.lock();
    lock_order::held(rank_);
  }
  // Not checked: a try can not deadlock (core/bounded_lock.h checks the
  // order of its waiting tries itself).
  bool try_lock() {
    if (!mutex_.try_lock()) return false;
    lock_order::held(rank_);
    return true;
  }
  void unlock() {
    lock_order::released(rank_);
    mutex_.unlock();
  }
  LockRank rank() const { return rank_; }
  // The mutex itself, for a condition variable's wait (RankedUniqueLock).
  std::mutex& native() { return mutex_; }

 private:
  std::mutex mutex_;
  const LockRank rank_;
};

// A std::unique_lock<std::mutex> over a RankedMutex, for std::condition_variable:
// the rank counts as held for the lock's whole life, waits included (a
// waiting thread takes nothing else, and takes the mutex back in the same place).
class RankedUniqueLock {
 public:
  explicit RankedUniqueLock(RankedMutex& m) : rank_(m.rank()) {
    lock_order::check(rank_, "lock");
    lock_ = std::unique_lock<std::mutex>(m.native());
    lock_order::held(rank_);
  }
  ~RankedUniqueLock() {
    if (lock_.owns_lock()) unlock();
  }
  RankedUniqueLock(const RankedUniqueLock&) = delete;
  RankedUniqueLock& operator=(const RankedUniqueLock&) = delete;
  void unlock() {
    lock_order::released(rank_);
    lock_.unlock();
  }
  std::unique_lock<std::mutex>& get() { return lock_; }

 private:
  const LockRank rank_;
  std::unique_lock<std::mutex> lock_;
};

}  // namespace cuxfer::shim
