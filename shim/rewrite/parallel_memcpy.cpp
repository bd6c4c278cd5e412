#include "rewrite/parallel_memcpy.h"

#include <chrono>
#include <cstring>

#include "record/recorder.h"

namespace cuxfer::shim::rewrite {
namespace {
constexpr size_t kPieceBytes = 256u << 10;  // big enough to amortise the atomic, small enough to balance
// Long enough to bridge the gap between two chunks of one transfer, short
// enough not to keep cores busy after it.
constexpr auto kSpin = std::chrono::microseconds(100);
}  // namespace

ParallelMemcpy::ParallelMemcpy(unsigned threads) {
  for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ParallelMemcpy::~ParallelMemcpy() {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
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
    std::memcpy(job_.dst + off, job_.src + off, n);
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
      std::unique_lock<std::mutex> lock(wake_mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
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
  std::lock_guard<std::mutex> submit(submit_mutex_);
  size_t piece = kPieceBytes;
  while ((bytes + piece - 1) / piece > 0xffff) piece *= 2;
  job_.dst = static_cast<char*>(dst);
  job_.src = static_cast<const char*>(src);
  job_.bytes = bytes;
  job_.piece = piece;
  job_.pieces = (bytes + piece - 1) / piece;
  done_pieces_.store(0, std::memory_order_relaxed);
  uint64_t gen = (ticket_.load(std::memory_order_relaxed) >> 32) + 1;
  ticket_.store((gen << 32) | (static_cast<uint64_t>(job_.pieces) << 16), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_pieces();
  while (done_pieces_.load(std::memory_order_acquire) != job_.pieces) {
  }
}

}  // namespace cuxfer::shim::rewrite
