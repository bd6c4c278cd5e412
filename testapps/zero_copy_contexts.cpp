// zero_copy_contexts [CONTEXTS=3] [N=400] [S=64] [KIND=created|green|green-alone]
// A device buffer that a policy sends to zero copy, used in context after
// context: each context (cuCtxCreate) gets its buffer from the same
// allocation site, N tiny synchronous H2D copies of S bytes into it on the
// per-thread default stream (built as with `nvcc --default-stream
// per-thread`: cuMemcpyHtoD_v2_ptds, so every rewritten copy waits in stream
// order through the thread's own event), one D2H of the whole buffer, every
// byte checked. Even contexts free their buffer before they are destroyed;
// odd ones are destroyed with it live (the driver frees it with them).
// A second thread, bound to a context of its own that outlives the others,
// copies beside each context's destruction: its event is of another context
// and must stay its own.
//
// green: each context is a green context (cuGreenCtxCreate, converted and
// pushed) ended with cuGreenCtxDestroy, beside the primary context the app
// retained first. The memory made in a green context is the primary
// context's and outlives it: the odd contexts' buffers are freed at the end,
// with the primary context current. green-alone: the same without the app's
// own reference to the primary context, which then goes with each green
// context (its last reference), and the odd contexts' buffers with it.
//
// Under a zero_copy policy the thread's event of a destroyed context must
// never be used again (the real driver freed it; simcuda aborts on it), nor
// a destroyed green context made current to free a buffer made in it.
//
// Exact traffic, per context (CONTEXTS of them), and again for the
// second thread's context once per context:
//   cuMemAlloc_v2          1 call   N*S bytes (device)
//   cuMemcpyHtoD_v2_ptds   H2D pageable -> device   N calls  N*S bytes
//   cuMemcpyDtoH_v2_ptds   D2H device -> pageable   1 call   N*S bytes
// Prints "zero_copy_contexts: <n> contexts OK".
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "driver_common.h"
#include "zero_copy_storm.h"

namespace {

using zero_copy_storm::alloc_buffer;
using zero_copy_storm::storm;

}  // namespace

int main(int argc, char** argv) {
  const size_t contexts = testapp::arg_size(argc, argv, 1, 3);
  const size_t n = testapp::arg_size(argc, argv, 2, 400);
  const size_t s = testapp::arg_size(argc, argv, 3, 64);
  const bool alone = argc > 4 && std::strcmp(argv[4], "green-alone") == 0;
  const bool green = alone || (argc > 4 && std::strcmp(argv[4], "green") == 0);
  if (argc > 4 && !green && std::strcmp(argv[4], "created") != 0) {
    std::fprintf(stderr, "zero_copy_contexts: KIND must be created, green or green-alone, not '%s'\n", argv[4]);
    return 2;
  }
  driver_require_gpu("zero_copy_contexts", cuInit(0));
  CUdevice dev = 0;
  DA_CHECK(cuDeviceGet(&dev, 0));
  CUcontext primary = nullptr;
  if (green && !alone) DA_CHECK(cuDevicePrimaryCtxRetain(&primary, dev));

  // The second thread: its own context, one storm per round, each round
  // started when the main thread is about to destroy a context.
  CUcontext other = nullptr;
  DA_CHECK(cuCtxCreate(&other, nullptr, 0, dev));
  DA_CHECK(cuCtxPopCurrent(nullptr));
  std::atomic<size_t> go{0}, done{0};
  std::thread worker([&] {
    DA_CHECK(cuCtxSetCurrent(other));
    const CUdeviceptr d = alloc_buffer(n * s);
    for (size_t round = 1; round <= contexts; ++round) {
      while (go.load() < round) std::this_thread::yield();
      storm(d, n, s, static_cast<uint32_t>(1000 + round));
      done.store(round);
    }
    DA_CHECK(cuMemFree(d));
  });

  std::vector<CUdeviceptr> outliving;  // green: the odd contexts' buffers
  for (size_t c = 0; c < contexts; ++c) {
    CUcontext ctx = nullptr;
    CUgreenCtx g = nullptr;
    if (green) ctx = driver_make_green("zero_copy_contexts", dev, g);
    else DA_CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));
    const CUdeviceptr d = alloc_buffer(n * s);
    storm(d, n, s, static_cast<uint32_t>(c * 10 + 1));
    storm(d, n, s, static_cast<uint32_t>(c * 10 + 2));
    if (c % 2 == 0) DA_CHECK(cuMemFree(d));
    else if (green && !alone) outliving.push_back(d);  // alone: it goes with the primary context
    go.store(c + 1);  // the worker copies while this context goes
    if (green) {
      CUcontext popped = nullptr;
      DA_CHECK(cuCtxPopCurrent(&popped));
      TA_ASSERT(popped == ctx);
      DA_CHECK(cuGreenCtxDestroy(g));  // destroys ctx with it; the memory stays
    } else {
      DA_CHECK(cuCtxDestroy(ctx));
    }
    while (done.load() < c + 1) std::this_thread::yield();
  }
  worker.join();
  DA_CHECK(cuCtxDestroy(other));
  if (green && !alone) {
    DA_CHECK(cuCtxPushCurrent(primary));
    for (CUdeviceptr d : outliving) DA_CHECK(cuMemFree(d));
    DA_CHECK(cuCtxPopCurrent(nullptr));
    DA_CHECK(cuDevicePrimaryCtxRelease(dev));
  }
  std::printf("zero_copy_contexts: %zu contexts OK\n", contexts);
  return 0;
}
