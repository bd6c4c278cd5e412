// nvtx_ranges: copies inside NVTX ranges whose per-range totals are known
// exactly (issue 15). NVTX v3 is header-only: it finds cuxfer through
// NVTX_INJECTION64_PATH, which `cuxfer record` sets. Simulation or GPU alike.
//
// Before any CUDA call the main thread opens "forked" and forks; the child
// copies inside it (a range open across the fork), then both close it.
// Exact traffic, parent:
//   "load"                   H2D pageable  1 MiB   x2
//   "load / decode"          H2D pageable  64 KiB  x3   (nested)
//   (no range)               D2H pinned    4 KiB   x1
//   "cuxfer-test::step"      D2H pageable  256 KiB x2   (a domain, a registered string)
//   "bad\xff\xfename"        H2D pinned    8 KiB   x1   (not UTF-8: reported as U+FFFD)
//   "wide ✓"                 D2H pageable  16 KiB  x1   (nvtxRangePushW)
//   "worker", second thread  H2D pinned    128 KiB x4   (started while main is inside "load")
//   one nvtxRangePop too many (ignored, and said in the trace's notes)
// Child: "forked"            H2D pageable  32 KiB  x2
// Every copy's data is checked.
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "common.h"

namespace {

void* g_device = nullptr;

// `n` copies of `bytes` in `dir`, from (or into) pageable or pinned memory.
void copies(cudaMemcpyKind dir, bool pinned, size_t bytes, int n, uint32_t seed) {
  void* host = nullptr;
  std::vector<unsigned char> pageable;
  if (pinned) {
    TA_CHECK(cudaMallocHost(&host, bytes));
  } else {
    pageable.resize(bytes);
    host = pageable.data();
  }
  std::vector<unsigned char> expect(bytes);
  for (int i = 0; i < n; ++i) {
    testapp::fill(expect.data(), bytes, seed + static_cast<uint32_t>(i));
    if (dir == cudaMemcpyHostToDevice) {
      std::memcpy(host, expect.data(), bytes);
      TA_CHECK(cudaMemcpy(g_device, host, bytes, dir));
    } else {
      // The bytes are put on the device by a memset: not a copy, so the
      // range's copy totals stay the ones listed above.
      TA_CHECK(cudaMemset(g_device, static_cast<int>(i + 1), bytes));
      TA_CHECK(cudaMemcpy(host, g_device, bytes, dir));
      std::memset(expect.data(), i + 1, bytes);
      TA_ASSERT(std::memcmp(host, expect.data(), bytes) == 0);
    }
  }
  if (pinned) TA_CHECK(cudaFreeHost(host));
}

}  // namespace

int main() {
  nvtxRangePushA("forked");
  const pid_t child = fork();
  TA_ASSERT(child >= 0);
  testapp::require_gpu("nvtx_ranges");
  TA_CHECK(cudaMalloc(&g_device, 1u << 20));
  if (child == 0) {
    copies(cudaMemcpyHostToDevice, false, 32u << 10, 2, 100);
    nvtxRangePop();
    TA_CHECK(cudaFree(g_device));
    return 0;  // exit() runs, so the shim writes the child's trace
  }
  nvtxRangePop();  // "forked"

  nvtxRangePushA("load");
  std::thread worker([] {
    nvtxRangePushA("worker");
    copies(cudaMemcpyHostToDevice, true, 128u << 10, 4, 200);
    nvtxRangePop();
  });
  worker.join();
  copies(cudaMemcpyHostToDevice, false, 1u << 20, 2, 300);
  nvtxRangePushA("decode");
  copies(cudaMemcpyHostToDevice, false, 64u << 10, 3, 400);
  nvtxRangePop();
  nvtxRangePop();  // "load"

  copies(cudaMemcpyDeviceToHost, true, 4u << 10, 1, 0);

  nvtxDomainHandle_t domain = nvtxDomainCreateA("cuxfer-test");
  nvtxStringHandle_t step = nvtxDomainRegisterStringA(domain, "step");
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = step;
  nvtxDomainRangePushEx(domain, &a);
  copies(cudaMemcpyDeviceToHost, false, 256u << 10, 2, 0);
  nvtxDomainRangePop(domain);

  nvtxRangePushA("bad\xff\xfename");
  copies(cudaMemcpyHostToDevice, true, 8u << 10, 1, 500);
  nvtxRangePop();

  nvtxRangePushW(L"wide \u2713");
  copies(cudaMemcpyDeviceToHost, false, 16u << 10, 1, 0);
  nvtxRangePop();
  nvtxRangePop();  // one too many

  TA_CHECK(cudaFree(g_device));
  int status = 0;
  TA_ASSERT(waitpid(child, &status, 0) == child);
  if (WIFEXITED(status) && WEXITSTATUS(status) == testapp::kSkip) return testapp::kSkip;
  TA_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  testapp::done("nvtx_ranges");
}
