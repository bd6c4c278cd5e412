// context_per_test [CONTEXTS=4] [S=16M] [END=destroy|detach|attach|green]
// What PyCUDA's test suite does: every test makes its own context
// (cuCtxCreate), copies, and ends it. Each context: cuMemAlloc S bytes, then
// twice H2D then D2H of S bytes from pageable buffers (sync), every byte
// checked; the buffers are freed and the context ended before the next, as
// END says:
//   destroy  cuCtxDestroy
//   detach   PyCUDA's context.pop() then detach(): cuCtxPopCurrent, later
//            cuCtxPushCurrent and cuCtxDetach, which destroys the context
//            (its usage count was 1). The next context is often made at the
//            destroyed one's address.
//   attach   cuCtxAttach first (usage count 2): the first cuCtxDetach leaves
//            the context alive and current, a third round of copies runs in
//            it, and the second detach destroys it.
//   green    each context a green context (cuGreenCtxCreate on all of the
//            device's SMs, converted with cuCtxFromGreenCtx and pushed),
//            popped and ended with cuGreenCtxDestroy, which destroys the
//            converted context with it.
// Under --rewrite=pin every context's copies are served (each gets its own
// staging pool), not only the first one's.
//
// Exact traffic, per context (CONTEXTS of them; R = 3 rounds for attach, else 2):
//   cuMemcpyHtoD_v2  H2D pageable -> device   R calls  R*S bytes
//   cuMemcpyDtoH_v2  D2H device -> pageable   R calls  R*S bytes
// Prints "context_per_test: <n> contexts OK".
#include <cstring>
#include <string>
#include <vector>

#include "driver_common.h"

namespace {
enum class End { Destroy, Detach, Attach, Green };

End end_of(int argc, char** argv) {
  const std::string e = argc > 3 ? argv[3] : "destroy";
  if (e == "destroy") return End::Destroy;
  if (e == "detach") return End::Detach;
  if (e == "attach") return End::Attach;
  if (e == "green") return End::Green;
  std::fprintf(stderr, "context_per_test: END must be destroy, detach, attach or green, not '%s'\n", e.c_str());
  std::exit(2);
}

void copy_round(CUdeviceptr d, std::vector<unsigned char>& src, std::vector<unsigned char>& dst, uint32_t seed) {
  const size_t s = src.size();
  testapp::fill(src.data(), s, seed);
  std::memset(dst.data(), 0, s);
  DA_CHECK(cuMemcpyHtoD(d, src.data(), s));
  DA_CHECK(cuMemcpyDtoH(dst.data(), d, s));
  TA_ASSERT(testapp::matches(dst.data(), s, seed));
}
}  // namespace

// cuCtxAttach and cuCtxDetach are deprecated, and still what PyCUDA calls.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

int main(int argc, char** argv) {
  const size_t contexts = testapp::arg_size(argc, argv, 1, 4);
  const size_t s = testapp::arg_size(argc, argv, 2, 16 << 20);
  const End end = end_of(argc, argv);
  driver_require_gpu("context_per_test", cuInit(0));
  CUdevice dev = 0;
  DA_CHECK(cuDeviceGet(&dev, 0));
  for (size_t c = 0; c < contexts; ++c) {
    CUcontext ctx = nullptr;
    CUgreenCtx green = nullptr;
    if (end == End::Green)
      ctx = driver_make_green("context_per_test", dev, green);
    else
      DA_CHECK(cuCtxCreate(&ctx, nullptr, 0, dev));  // CUDA 13: cuCtxCreate_v4, no creation parameters
    CUdeviceptr d = 0;
    DA_CHECK(cuMemAlloc(&d, s));
    std::vector<unsigned char> src(s), dst(s);
    for (uint32_t round = 0; round < 2; ++round) copy_round(d, src, dst, static_cast<uint32_t>(c * 10 + round));
    switch (end) {
      case End::Destroy:
        DA_CHECK(cuMemFree(d));
        DA_CHECK(cuCtxDestroy(ctx));
        break;
      case End::Detach: {
        DA_CHECK(cuMemFree(d));
        CUcontext popped = nullptr;
        DA_CHECK(cuCtxPopCurrent(&popped));
        TA_ASSERT(popped == ctx);
        DA_CHECK(cuCtxPushCurrent(ctx));
        DA_CHECK(cuCtxDetach(ctx));  // the last reference: the context is destroyed
        break;
      }
      case End::Attach: {
        CUcontext attached = nullptr;
        DA_CHECK(cuCtxAttach(&attached, 0));
        TA_ASSERT(attached == ctx);
        DA_CHECK(cuCtxDetach(ctx));  // not the last: the context stays, still current
        copy_round(d, src, dst, static_cast<uint32_t>(c * 10 + 2));
        DA_CHECK(cuMemFree(d));
        DA_CHECK(cuCtxDetach(ctx));  // the last
        break;
      }
      case End::Green: {
        DA_CHECK(cuMemFree(d));
        CUcontext popped = nullptr;
        DA_CHECK(cuCtxPopCurrent(&popped));
        TA_ASSERT(popped == ctx);
        DA_CHECK(cuGreenCtxDestroy(green));  // destroys ctx with it
        break;
      }
    }
  }
  std::printf("context_per_test: %zu contexts OK\n", contexts);
  return 0;
}
