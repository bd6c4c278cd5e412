// Waiting out another thread's short critical section without a lock: the
// seqlock readers (memory/allocation_table, rewrite/registration_cache) retry
// while a writer is mid-update. A pause first; after 64 tries the thread
// yields its CPU, since the writer may be preempted (an app with more threads
// than cores) and spinning would only keep it off the CPU it needs: 64
// threads spinning on 2 cores under ThreadSanitizer starved the writer for
// minutes (e2e.threads64, 2026-12-02).
#pragma once

#include <sched.h>

namespace cuxfer::shim {

inline void spin_relax(unsigned& spins) {
  if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    sched_yield();
  }
}

}  // namespace cuxfer::shim
