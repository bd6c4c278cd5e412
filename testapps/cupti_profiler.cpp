// cupti_profiler late|early|finalize [S=1M]
// An application with its own CUPTI profiler, as the PyTorch profiler
// (kineto) is: it registers its own activity buffer callbacks, enables memcpy
// records and checks that every buffer its completion callback receives is
// one it handed out ("bufferCompleted called with unknown buffer" otherwise).
// Simulation only: it links the stand-in libcupti (tests/simcuda/cupti.cpp)
// and asks it for records with simcupti_emit.
//
//   late      the profiler starts after the app's first copies (the shim's
//             collector holds CUPTI by then and must hand it over);
//   early     it starts before any CUDA call (the shim must leave CUPTI alone);
//   finalize  the app calls cuptiFinalize after its copies.
//
// Exact traffic (every mode): 2 cudaMemcpy H2D pageable -> device of S bytes,
// 1 cudaMalloc of S bytes. Records emitted: 1 before the profiler starts
// (the shim's in `late` and `finalize`, the profiler's in `early`), 2 after
// (the profiler's).
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common.h"

extern "C" int simcupti_emit(uint64_t bytes, uint32_t correlation_id);

namespace {

std::mutex g_mutex;
std::set<uint8_t*> g_ours;
int g_unknown = 0;
int g_records = 0;

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 1 << 16;
  *buffer = static_cast<uint8_t*>(std::malloc(*size));
  *max_records = 0;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_ours.insert(*buffer);
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_ours.erase(buffer)) {
    std::fprintf(stderr, "cupti_profiler: bufferCompleted called with unknown buffer %p\n",
                 static_cast<void*>(buffer));
    ++g_unknown;
    return;  // not ours to free
  }
  CUpti_Activity* rec = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) ++g_records;
  std::free(buffer);
}

void start_profiler() {
  TA_ASSERT(cuptiActivityRegisterCallbacks(requested, completed) == CUPTI_SUCCESS);
  TA_ASSERT(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS);
}

void copy(void* d, std::vector<unsigned char>& h) {
  TA_CHECK(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "late";
  const size_t s = testapp::arg_size(argc, argv, 2, 1 << 20);
  if (mode != "late" && mode != "early" && mode != "finalize") {
    std::fprintf(stderr, "usage: cupti_profiler late|early|finalize [S]\n");
    return 2;
  }
  if (mode == "early") start_profiler();
  testapp::require_gpu("cupti_profiler");
  std::vector<unsigned char> h(s);
  testapp::fill(h.data(), s, 5);
  void* d = nullptr;
  TA_CHECK(cudaMalloc(&d, s));
  copy(d, h);
  // Under the shim (late/finalize) this record lands in the shim's buffer;
  // in `early` mode it is the profiler's.
  const int before = simcupti_emit(s, 1);
  if (mode == "late") start_profiler();
  if (mode == "finalize") {
    TA_ASSERT(cuptiFinalize() == CUPTI_SUCCESS);
    start_profiler();  // a profiler starting over after finalize
  }
  copy(d, h);
  const int emitted = simcupti_emit(s, 2) + simcupti_emit(s, 3);
  TA_ASSERT(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
  TA_CHECK(cudaFree(d));
  std::printf("cupti_profiler: %d records for the profiler (%d emitted), %d unknown buffers\n",
              g_records, emitted, g_unknown);
  TA_ASSERT(g_unknown == 0);
  TA_ASSERT(emitted == 2 && g_records == emitted + (mode == "early" ? before : 0));
  testapp::done("cupti_profiler");
  return 0;
}
