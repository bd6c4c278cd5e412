#include "rewrite/parallel_memcpy.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "record/recorder.h"

namespace cuxfer::shim::rewrite {
namespace {
constexpr size_t kPieceBytes = 256u << 10;  // big enough to amortise the atomic, small enough to balance
// Long enough to bridge the gap between two chunks of one transfer, short
// enough not to keep cores busy after it.
constexpr auto kSpin = std::chrono::microseconds(100);
constexpr size_t kPopulatePiece = 2u << 20;
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
// The raw system call: libcuxfer_memhooks.so interposes madvise(), and this
// is the shim's own doing, not the app's.
bool populate_write(char* begin, size_t bytes) {
  return syscall(SYS_madvise, begin, bytes, MADV_POPULATE_WRITE) == 0;
}
}  // namespace

ParallelMemcpy::ParallelMemcpy(unsigned threads) {
  workers_.reserve(threads);
  for (unsigned i = 1; i < threads; ++i) {
    QuietThread t;
    if (!t.start([this] { worker_loop(); })) break;  // fewer workers: each copy still completes
    workers_.push_back(std::move(t));
  }
}

ParallelMemcpy::~ParallelMemcpy() {
  {
    std::lock_guard<RankedMutex> lock(wake_mutex_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ParallelMemcpy::run_pieces() {
  for (;;) {
    uint64_t t = ticket_.load(std::memory_order_acquire);
    uint64_t pieces = (t >> 16) & 0xffff, i = t & 0xffff;
    if (i >= pieces) return;
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    // The job of this ticket is unfinished (piece i is ours), so its fields are stable.
    size_t off = i * job_.piece;
    size_t n = off + job_.piece <= job_.bytes ? job_.piece : job_.bytes - off;
    if (job_.populate) {
      if (!populate_write(job_.dst + off, n)) populate_failed_.store(true, std::memory_order_relaxed);
    } else {
      std::memcpy(job_.dst + off, job_.src + off, n);
    }
    done_pieces_.fetch_add(1, std::memory_order_release);
  }
}

void ParallelMemcpy::worker_loop() {
  InternalScope internal;  // nothing this thread does is the app's
  uint64_t seen = 0;
  for (;;) {
    auto spin_until = std::chrono::steady_clock::now() + kSpin;
    uint64_t g;
    while ((g = generation_.load(std::memory_order_acquire)) == seen &&
           std::chrono::steady_clock::now() < spin_until) {
    }
    if (g == seen) {
      RankedUniqueLock lock(wake_mutex_);
      wake_.wait(lock.get(), [&] { return generation_.load(std::memory_order_acquire) != seen; });
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    run_pieces();
  }
}

void ParallelMemcpy::copy(void* dst, const void* src, size_t bytes) {
  if (workers_.empty() || bytes < 2 * kPieceBytes) {
    std::memcpy(dst, src, bytes);
    return;
  }
  size_t piece = kPieceBytes;
  while ((bytes + piece - 1) / piece > 0xffff) piece *= 2;
  run_job(static_cast<char*>(dst), static_cast<const char*>(src), bytes, piece, false);
}

bool ParallelMemcpy::populate(void* dst, size_t bytes) {
  // Whole pages only: the range is widened to its pages, whose bytes stay as they are.
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = reinterpret_cast<uintptr_t>(dst) & ~(page - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(dst) + bytes + page - 1) & ~(page - 1);
  if (e <= b) return false;
  populate_failed_.store(false, std::memory_order_relaxed);
  if (workers_.empty()) return populate_write(reinterpret_cast<char*>(b), e - b);
  size_t piece = kPopulatePiece;
  while ((e - b + piece - 1) / piece > 0xffff) piece *= 2;
  run_job(reinterpret_cast<char*>(b), nullptr, e - b, piece, true);
  return !populate_failed_.load(std::memory_order_relaxed);
}

void ParallelMemcpy::run_job(char* dst, const char* src, size_t bytes, size_t piece, bool populate) {
  std::lock_guard<RankedMutex> submit(submit_mutex_);
  job_.dst = dst;
  job_.src = src;
  job_.bytes = bytes;
  job_.piece = piece;
  job_.pieces = (bytes + piece - 1) / piece;
  job_.populate = populate;
  done_pieces_.store(0, std::memory_order_relaxed);
  uint64_t gen = (ticket_.load(std::memory_order_relaxed) >> 32) + 1;
  ticket_.store((gen << 32) | (static_cast<uint64_t>(job_.pieces) << 16), std::memory_order_release);
  {
    std::lock_guard<RankedMutex> lock(wake_mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_pieces();
  while (done_pieces_.load(std::memory_order_acquire) != job_.pieces) {
  }
}

}  // namespace cuxfer::shim::rewrite
