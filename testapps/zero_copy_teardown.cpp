// zero_copy_teardown [ROUNDS=3] [N=400] [S=64]
// A device buffer that a policy sends to zero copy, used in contexts that go
// in the two ways zero_copy_contexts does not exercise, while a long-lived
// thread keeps copying in a context of its own:
//   1. the primary context: ROUNDS times, the main thread retains it, makes it
//      current, allocates a buffer and fills it (two storms), then resets it
//      (cuDevicePrimaryCtxReset, what cudaDeviceReset does); the next round
//      works in the fresh primary context, whose handle is the old one's;
//   2. a context made on another thread: ROUNDS times, a second thread makes a
//      context, allocates a buffer in it, fills it (two storms) and pops it,
//      idle from then on; the main thread destroys that context. The second
//      thread's next context may have the destroyed one's address.
// Even rounds free their buffer first; odd ones leave it to the teardown.
// The keeper thread storms once before the rounds (its event is made then)
// and once after each teardown (in round 2, while the context goes): its
// event is of a context that lives throughout, and must stay the same one.
//
// A storm: N tiny synchronous H2D copies of S bytes on the per-thread default
// stream (built as with `nvcc --default-stream per-thread`: every rewritten
// copy waits in stream order through the thread's own event), one D2H of the
// whole buffer, every byte checked.
//
// Exact traffic: 1 + 2*ROUNDS device allocations of N*S bytes (cuMemAlloc_v2),
// and 1 + 6*ROUNDS storms, each
//   cuMemcpyHtoD_v2_ptds   H2D pageable -> device   N calls  N*S bytes
//   cuMemcpyDtoH_v2_ptds   D2H device -> pageable   1 call   N*S bytes
// Prints "zero_copy_teardown: <R> primary resets, <R> contexts destroyed across threads OK".
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <atomic>
#include <thread>
#include <vector>

#include "driver_common.h"
#include "zero_copy_storm.h"

namespace {

using zero_copy_storm::alloc_buffer;
using zero_copy_storm::storm;
using zero_copy_storm::wait_for;

}  // namespace

int main(int argc, char** argv) {
  const size_t rounds = testapp::arg_size(argc, argv, 1, 3);
  const size_t n = testapp::arg_size(argc, argv, 2, 400);
  const size_t s = testapp::arg_size(argc, argv, 3, 64);
  driver_require_gpu("zero_copy_teardown", cuInit(0));
  CUdevice dev = 0;
  DA_CHECK(cuDeviceGet(&dev, 0));

  // The keeper: its own context for the whole run; a storm before the rounds,
  // then one per teardown, each started when go says so.
  CUcontext keep = nullptr;
  DA_CHECK(cuCtxCreate(&keep, nullptr, 0, dev));
  DA_CHECK(cuCtxPopCurrent(nullptr));
  const size_t teardowns = 2 * rounds;
  std::atomic<size_t> go{0}, done{0};
  std::atomic<bool> ready{false};
  std::thread keeper([&] {
    DA_CHECK(cuCtxSetCurrent(keep));
    const CUdeviceptr d = alloc_buffer(n * s);
    storm(d, n, s, 500);
    ready.store(true);
    for (size_t t = 1; t <= teardowns; ++t) {
      wait_for(go, t);
      storm(d, n, s, static_cast<uint32_t>(1000 + t));
      done.store(t);
    }
    DA_CHECK(cuMemFree(d));
  });
  while (!ready.load()) std::this_thread::yield();
  size_t t = 0;

  // 1. The primary context, reset after each round. The reset is alone on the
  // device ("no other module in the process is using the device"): the
  // keeper copies after it.
  for (size_t r = 0; r < rounds; ++r) {
    CUcontext primary = nullptr;
    DA_CHECK(cuDevicePrimaryCtxRetain(&primary, dev));
    DA_CHECK(cuCtxSetCurrent(primary));
    const CUdeviceptr d = alloc_buffer(n * s);
    storm(d, n, s, static_cast<uint32_t>(r * 10 + 1));
    storm(d, n, s, static_cast<uint32_t>(r * 10 + 2));
    if (r % 2 == 0) DA_CHECK(cuMemFree(d));
    DA_CHECK(cuDevicePrimaryCtxReset(dev));
    go.store(++t);
    wait_for(done, t);
  }

  // 2. A context made and used on the maker thread, destroyed here while the
  // keeper copies in its own.
  std::atomic<size_t> make{0}, made{0};
  std::atomic<CUcontext> made_ctx{nullptr};
  std::thread maker([&] {
    for (size_t r = 0; r < rounds; ++r) {
      wait_for(make, r + 1);
      CUcontext ctx = nullptr;
      DA_CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));
      const CUdeviceptr d = alloc_buffer(n * s);
      storm(d, n, s, static_cast<uint32_t>(100 + r * 10 + 1));
      storm(d, n, s, static_cast<uint32_t>(100 + r * 10 + 2));
      if (r % 2 == 0) DA_CHECK(cuMemFree(d));
      DA_CHECK(cuCtxPopCurrent(nullptr));  // idle from here on, its event of ctx kept
      made_ctx.store(ctx);
      made.store(r + 1);
    }
  });
  for (size_t r = 0; r < rounds; ++r) {
    make.store(r + 1);
    wait_for(made, r + 1);
    go.store(++t);  // the keeper copies while the context goes
    DA_CHECK(cuCtxDestroy(made_ctx.load()));
    wait_for(done, t);
  }
  maker.join();
  keeper.join();
  DA_CHECK(cuCtxDestroy(keep));
  std::printf("zero_copy_teardown: %zu primary resets, %zu contexts destroyed across threads OK\n", rounds,
              rounds);
  return 0;
}
