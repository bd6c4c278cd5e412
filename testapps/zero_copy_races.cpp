// zero_copy_races drop|release|sync [ROUNDS=4] [N=300] [S=64]
// A device buffer that a policy sends to zero copy (zero_copy_storm.h's
// allocation site), in contexts that another thread tears down at the worst
// moment for the shim.
//
// drop: a worker thread keeps a context Y of its own (a buffer and a storm in
//   it first). Each round the main thread makes a context X; the worker makes
//   X current, allocates a buffer in it and storms (its per-thread event is
//   then of X), says so, makes Y current again and storms there: its first
//   copy in Y destroys its event of X. The main thread destroys X a moment
//   after the worker said so, while the worker is on its way to that destroy.
//   On the simulated CUDA with SIMCUDA_EVENT_DESTROY_DELAY_US the worker's
//   cuEventDestroy is held at its entry long enough for X's destruction to
//   land first unless the shim makes "X lives" and the destroy one step
//   (an event of a destroyed context aborts there).
// release: drop with the device's primary context as X: the main thread
//   retains it each round and releases it (its last reference: the driver
//   destroys it) where drop destroys X. The shim learns that a release was
//   the last only after it: until then the context must count as going.
// sync: each round the main thread makes a context X, allocates a buffer in
//   it, storms, and leaves work of X in flight (an event recorded on a stream
//   of X, not waited for), then makes its context Y current and, in even
//   rounds, frees the buffer (cuMemFree of X's memory with Y current), then
//   destroys X. Whoever frees X's zero-copy memory must first wait for X's
//   work, not for the current context's: on the simulated CUDA with
//   SIMCUDA_EVENTS_PENDING=1, freeing it while X's event is pending aborts.
//
// A storm: N tiny synchronous H2D copies of S bytes on the per-thread default
// stream, one D2H of the whole buffer, every byte checked (zero_copy_storm.h).
//
// Exact traffic: drop and release: 1 + ROUNDS device allocations of N*S bytes
// (cuMemAlloc_v2) and 1 + 2*ROUNDS storms; sync: ROUNDS allocations and
// ROUNDS storms; each storm
//   cuMemcpyHtoD_v2_ptds   H2D pageable -> device   N calls  N*S bytes
//   cuMemcpyDtoH_v2_ptds   D2H device -> pageable   1 call   N*S bytes
// Prints "zero_copy_races: <mode> <R> rounds OK".
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "driver_common.h"
#include "zero_copy_storm.h"

namespace {

using zero_copy_storm::alloc_buffer;
using zero_copy_storm::storm;
using zero_copy_storm::wait_for;


void drop(CUdevice dev, size_t rounds, size_t n, size_t s, bool primary) {
  std::atomic<size_t> made{0}, switching{0}, done{0};
  std::atomic<CUcontext> x_ctx{nullptr};
  std::thread worker([&] {
    CUcontext y = nullptr;
    DA_CHECK(cuCtxCreate(&y, nullptr, 0, dev));
    const CUdeviceptr dy = alloc_buffer(n * s);
    storm(dy, n, s, 7);
    for (size_t r = 0; r < rounds; ++r) {
      wait_for(made, r + 1);
      DA_CHECK(cuCtxSetCurrent(x_ctx.load()));
      const CUdeviceptr dx = alloc_buffer(n * s);
      storm(dx, n, s, static_cast<uint32_t>(10 + r));
      if (r % 2 == 0) DA_CHECK(cuMemFree(dx));  // odd rounds: left to X's destruction
      DA_CHECK(cuCtxSetCurrent(y));
      switching.store(r + 1);
      storm(dy, n, s, static_cast<uint32_t>(100 + r));  // its first copy destroys the event of X
      done.store(r + 1);
    }
    DA_CHECK(cuMemFree(dy));
    DA_CHECK(cuCtxDestroy(y));
  });
  for (size_t r = 0; r < rounds; ++r) {
    CUcontext x = nullptr;
    if (primary) {
      DA_CHECK(cuDevicePrimaryCtxRetain(&x, dev));
    } else {
      DA_CHECK(cuCtxCreate(&x, nullptr, 0, dev));
      DA_CHECK(cuCtxPopCurrent(nullptr));
    }
    x_ctx.store(x);
    made.store(r + 1);
    wait_for(switching, r + 1);
    // The worker is on its way to its first copy in Y (a few microseconds
    // away); a simulated delayed cuEventDestroy holds it there far longer.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (primary)
      DA_CHECK(cuDevicePrimaryCtxRelease(dev));  // the last reference: X is destroyed
    else
      DA_CHECK(cuCtxDestroy(x));
    wait_for(done, r + 1);
  }
  worker.join();
}

void sync(CUdevice dev, size_t rounds, size_t n, size_t s) {
  CUcontext y = nullptr;
  DA_CHECK(cuCtxCreate(&y, nullptr, 0, dev));
  DA_CHECK(cuCtxPopCurrent(nullptr));
  for (size_t r = 0; r < rounds; ++r) {
    CUcontext x = nullptr;
    DA_CHECK(cuCtxCreate(&x, nullptr, 0, dev));
    const CUdeviceptr d = alloc_buffer(n * s);
    storm(d, n, s, static_cast<uint32_t>(200 + r));
    // Work of X in flight (on a GPU, a kernel reading the buffer would be
    // ordered before this event): nobody waits for it here.
    CUstream st = nullptr;
    DA_CHECK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CUevent ev = nullptr;
    DA_CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    DA_CHECK(cuEventRecord(ev, st));
    DA_CHECK(cuCtxSetCurrent(y));            // Y current now; X's work still in flight
    if (r % 2 == 0) DA_CHECK(cuMemFree(d));  // X's memory freed with Y current
    DA_CHECK(cuCtxDestroy(x));               // its stream and event go with it
  }
  DA_CHECK(cuCtxSetCurrent(nullptr));
  DA_CHECK(cuCtxDestroy(y));
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  const bool is_drop = std::strcmp(mode, "drop") == 0, is_release = std::strcmp(mode, "release") == 0;
  if (!is_drop && !is_release && std::strcmp(mode, "sync") != 0) {
    std::fprintf(stderr, "usage: zero_copy_races drop|release|sync [ROUNDS] [N] [S]\n");
    return 2;
  }
  const size_t rounds = testapp::arg_size(argc, argv, 2, 4);
  const size_t n = testapp::arg_size(argc, argv, 3, 300);
  const size_t s = testapp::arg_size(argc, argv, 4, 64);
  driver_require_gpu("zero_copy_races", cuInit(0));
  CUdevice dev = 0;
  DA_CHECK(cuDeviceGet(&dev, 0));
  if (is_drop || is_release)
    drop(dev, rounds, n, s, is_release);
  else
    sync(dev, rounds, n, s);
  std::printf("zero_copy_races: %s %zu rounds OK\n", mode, rounds);
  return 0;
}
