// Host memcpy spread over a few threads. Staging is bounded by host memcpy
// bandwidth (one thread moves ~8 GB/s, sixteen ~34 GB/s on the H200 machine),
// so one big copy is cut into pieces that the caller and the workers take
// with an atomic counter. Workers spin briefly before sleeping, so that the
// back-to-back chunks of one staged transfer do not pay a wake-up each.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/quiet_thread.h"
#include "core/ranked_lock.h"

namespace cuxfer::shim::rewrite {

class ParallelMemcpy {
 public:
  // `threads` includes the caller: threads - 1 workers are started.
  explicit ParallelMemcpy(unsigned threads);
  // Stops and joins the workers. (The shim never destroys its instance: it
  // serves copies until the process ends.)
  ~ParallelMemcpy();
  ParallelMemcpy(const ParallelMemcpy&) = delete;
  ParallelMemcpy& operator=(const ParallelMemcpy&) = delete;

  // Copies like memcpy; returns when every byte is in place. One copy at a
  // time: concurrent callers are serialized (the workers are shared).
  void copy(void* dst, const void* src, size_t bytes);
  // Faults in [dst, dst+bytes) for writing on all threads (MADV_POPULATE_WRITE,
  // Linux 5.14+), as the copy into it would, without changing a byte. For a
  // fresh destination (PyTorch's tensor.cpu() into new memory) the page
  // faults, not the memcpy, bound a staged D2H: taken on every thread while
  // the first chunks' DMA runs, they stop serialising behind it. False when
  // the kernel cannot (then nothing was done).
  bool populate(void* dst, size_t bytes);
  unsigned threads() const { return static_cast<unsigned>(workers_.size()) + 1; }

 private:
  struct Job {
    char* dst = nullptr;
    const char* src = nullptr;
    size_t bytes = 0;
    size_t piece = 0;
    size_t pieces = 0;
    bool populate = false;  // madvise(MADV_POPULATE_WRITE) each piece instead of copying
  };
  void worker_loop();
  void run_pieces();
  void run_job(char* dst, const char* src, size_t bytes, size_t piece, bool populate);

  RankedMutex submit_mutex_{LockRank::kParallelMemcpySubmit};  // one job at a time
  RankedMutex wake_mutex_{LockRank::kParallelMemcpyWake};
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};  // bumped per job; sleeping workers watch it
  std::atomic<bool> stop_{false};
  Job job_;
  // Work tickets: generation (32 bits) | piece count (16) | next piece (16).
  // A piece is taken by a CAS on the whole ticket, so a worker that arrives
  // late, after its job finished and the next one began, can never take a
  // piece of a job whose fields it has not seen published.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<size_t> done_pieces_{0};
  std::atomic<bool> populate_failed_{false};
  std::vector<QuietThread> workers_;  // signals blocked; fewer when some could not start
};

}  // namespace cuxfer::shim::rewrite
