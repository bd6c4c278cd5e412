// libnvtx_counter.so: a stand-in for another NVTX tool (nsys, a tracer the app
// ships), to test that cuxfer chains to it (CUXFER_NVTX_NEXT). It counts the
// nvtxRangePushA and nvtxRangePop calls it receives and prints
// "nvtx_counter: pid=P pushes=N pops=M" when the process exits.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace {

std::atomic<int> g_pushes{0}, g_pops{0}, g_depth{0};

int NVTX_API push_a(const char*) {
  g_pushes.fetch_add(1);
  return g_depth.fetch_add(1);
}

int NVTX_API pop() {
  g_pops.fetch_add(1);
  return g_depth.fetch_sub(1) - 1;
}

struct Report {
  ~Report() { std::printf("nvtx_counter: pid=%d pushes=%d pops=%d\n", getpid(), g_pushes.load(), g_pops.load()); }
} g_report;

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  auto callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable core = nullptr;
  unsigned size = 0;
  if (!callbacks || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &size) || !core) return 0;
  *core[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&push_a);
  *core[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&pop);
  return 1;
}
