// nvtx_overhead: what an NVTX range push and pop cost a program when cuxfer is
// its NVTX injection library (shim/record/nvtx_ranges.h), against NVTX with no
// tool attached (its calls are then no-ops). Issue 15's bar: <= 100 ns per
// push/pop with cuxfer.
//
//   nvtx_overhead [-n PAIRS]        prints, per case, the median over 101
//                                   batches of ns per push+pop pair
// Run it plain and with cuxfer (LD_PRELOAD=libcuxfer.so
// NVTX_INJECTION64_PATH=libcuxfer.so); bench/run_nvtx_overhead.sh does both.
// Cases: one literal name (a training loop's "step"), eight names in turn,
// and a name built fresh in a buffer each time (Python's f-strings), nested
// two deep. No CUDA call is made: the pushes alone are timed.
#include <nvtx3/nvToolsExt.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

template <typename Body>
double median_ns_per_pair(size_t pairs, Body body) {
  constexpr int kBatches = 101;
  std::vector<double> per;
  const size_t batch = std::max<size_t>(1, pairs / kBatches);
  for (int b = 0; b < kBatches; ++b) {
    const uint64_t t0 = now_ns();
    for (size_t i = 0; i < batch; ++i) body(i);
    per.push_back(double(now_ns() - t0) / double(batch));
  }
  std::nth_element(per.begin(), per.begin() + kBatches / 2, per.end());
  return per[kBatches / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t pairs = 2000000;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "-n") == 0) pairs = std::strtoull(argv[i + 1], nullptr, 10);
  nvtxRangePushA("warm-up");  // NVTX loads its tool at the first call
  nvtxRangePop();
  const char* names[8] = {"step", "forward", "backward", "optimizer", "load", "decode", "h2d", "d2h"};
  char fresh[32];
  struct Case {
    const char* name;
    double ns;
  } cases[] = {
      {"one_name", median_ns_per_pair(pairs, [](size_t) {
         nvtxRangePushA("step");
         nvtxRangePop();
       })},
      {"eight_names", median_ns_per_pair(pairs, [&](size_t i) {
         nvtxRangePushA(names[i & 7]);
         nvtxRangePop();
       })},
      {"fresh_buffer", median_ns_per_pair(pairs, [&](size_t i) {
         std::snprintf(fresh, sizeof fresh, "batch %zu", i & 15);
         nvtxRangePushA(fresh);
         nvtxRangePop();
       })},
      {"nested_two", median_ns_per_pair(pairs / 2, [&](size_t) {
         nvtxRangePushA("outer");
         nvtxRangePushA("inner");
         nvtxRangePop();
         nvtxRangePop();
       })},
  };
  for (const auto& c : cases) std::printf("case=%s pairs=%zu median_ns_per_pair=%.1f\n", c.name, pairs, c.ns);
  return 0;
}
