// Taking a lock with a deadline, for the fork handlers: a lock the shim's
// writer holds across a CUDA or CUPTI call may never be released while the
// forking thread waits, when a driver's own fork handler, which ran first,
// holds a lock that call needs (record/recorder.cpp, prepare_fork). Waiting
// in short sleeps, not spinning: the holder may need this core.
#pragma once

#include <cstdint>
#include <ctime>
#include <mutex>
#include <new>

#include "core/clock.h"
#include "core/ranked_lock.h"

namespace cuxfer::shim {

// Locks `m` unless `deadline_ns` (now_ns()'s clock) passes first; true when
// held. In the lock order like a plain lock: the deadline only bounds a wait
// the order already makes safe among the shim's own threads.
inline bool lock_before(RankedMutex& m, uint64_t deadline_ns) {
  lock_order::check(m.rank(), "a bounded wait");
  while (!m.try_lock()) {
    if (now_ns() >= deadline_ns) return false;
    timespec pause{0, 50'000};
    nanosleep(&pause, nullptr);
  }
  return true;
}

// A fork child's copy of a mutex that a thread of the parent held, which does
// not exist here: made unlocked again. The child runs one thread at this
// point, and nothing the lock guarded is read again (the caller's contract).
// (Constructed over, not destroyed first: glibc's mutex holds no resource.)
inline void remake_in_fork_child(RankedMutex& m) { new (&m.native()) std::mutex(); }

}  // namespace cuxfer::shim
