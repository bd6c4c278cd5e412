// cuxfer-calibrate: measures this machine's transfer curves for one GPU and
// prints a machine profile (schema cuxfer.machine/1, docs/calibrate.md) on
// stdout. `cuxfer calibrate` runs it and stores the profile; it can also be
// run by hand.
//
//   cuxfer-calibrate [--device N] [--max-size BYTES] [--quick]
//
// What it measures, like bandwidthTest (CUDA events around synchronous
// cudaMemcpy on the legacy stream, median of the reps):
//   copy          pinned (cudaMallocHost) and reused pageable (malloc) memory,
//                 H2D and D2H, 4 B .. max-size (1 GiB) in steps of 4x
//   registration  cudaHostRegister + cudaHostUnregister of touched pageable
//                 memory, 1 MiB .. 1 GiB
//   host_memcpy   memcpy bandwidth with 1, 2, 4, 8, 16 threads (256 MiB)
// Exit status: 0 with a profile; 77 "no GPU"; 1 on a CUDA error.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>

#include "analyzer/model/machine_profile.h"

namespace {

using cuxfer::model::CopyPoint;
using cuxfer::model::MachineProfile;

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    cudaError_t e_ = (call);                                                                            \
    if (e_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "cuxfer-calibrate: %s failed: %s (%d)\n", #call, cudaGetErrorName(e_), e_); \
      std::exit(1);                                                                                     \
    }                                                                                                   \
  } while (0)

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int reps_for(uint64_t bytes, bool quick) {
  const uint64_t budget = quick ? (64ull << 20) : (256ull << 20);
  return static_cast<int>(std::clamp<uint64_t>(budget / std::max<uint64_t>(bytes, 1), quick ? 3 : 5, quick ? 10 : 30));
}

struct Copier {
  cudaEvent_t a = nullptr, b = nullptr;
  Copier() {
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
  }
  // Median GB/s of synchronous copies between `host` and `dev`.
  double gbps(void* host, void* dev, uint64_t bytes, bool h2d, int reps) {
    std::vector<double> us;
    for (int r = -1; r < reps; ++r) {  // one warm-up
      CHECK(cudaEventRecord(a, 0));
      CHECK(h2d ? cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice)
                : cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
      CHECK(cudaEventRecord(b, 0));
      CHECK(cudaEventSynchronize(b));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      if (r >= 0) us.push_back(static_cast<double>(ms) * 1e3);
    }
    const double m = median(us);
    return m > 0 ? static_cast<double>(bytes) / m * 1e-3 : 0;
  }
};

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(colon + 2);
    }
  return "";
}

double memcpy_gbps(unsigned threads, char* dst, const char* src, uint64_t bytes) {
  std::vector<double> runs;
  for (int r = -1; r < 5; ++r) {  // one warm-up
    const double t0 = now_us();
    std::vector<std::thread> pool;
    const uint64_t per = (bytes / threads + 4095) & ~uint64_t(4095);
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([=] {
        uint64_t off = t * per;
        if (off < bytes) std::memcpy(dst + off, src + off, std::min(per, bytes - off));
      });
    for (auto& th : pool) th.join();
    if (r >= 0) runs.push_back(now_us() - t0);
  }
  return static_cast<double>(bytes) / median(runs) * 1e-3;
}

std::string iso_now() {
  char buf[32];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0;
  uint64_t max_size = 1ull << 30;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device = std::atoi(argv[++i]);
    else if (a == "--max-size" && i + 1 < argc) max_size = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--quick") quick = true;
    else {
      std::fprintf(stderr, "cuxfer-calibrate: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("cuxfer-calibrate: no GPU (no CUDA device is usable): nothing to calibrate\n");
    return 77;
  }
  if (device < 0 || device >= count) {
    std::fprintf(stderr, "cuxfer-calibrate: --device %d: this machine has %d device(s)\n", device, count);
    return 2;
  }
  CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, device));
  MachineProfile p;
  p.created = iso_now();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  p.hostname = host;
  p.cpu = cpu_model();
  p.cores = std::thread::hardware_concurrency();
  p.gpu_index = device;
  p.gpu_name = prop.name;
  char uuid[64];
  const auto* u = reinterpret_cast<const unsigned char*>(&prop.uuid);
  std::snprintf(uuid, sizeof uuid, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  p.gpu_uuid = uuid;
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", prop.pciDomainID, prop.pciBusID, prop.pciDeviceID);
  p.pci_bus_id = bus;
  cudaDriverGetVersion(&p.driver_version);
  using SimFn = int (*)();
  auto sim = reinterpret_cast<SimFn>(dlsym(RTLD_DEFAULT, "simcuda_is_simulated"));
  p.simulated = sim && sim() != 0;

  std::fprintf(stderr, "cuxfer-calibrate: %s (%s), sizes 4 B..%llu B%s\n", p.gpu_name.c_str(), p.pci_bus_id.c_str(),
               static_cast<unsigned long long>(max_size), quick ? ", quick" : "");
  void* dev = nullptr;
  void* pinned = nullptr;
  CHECK(cudaMalloc(&dev, max_size));
  CHECK(cudaMallocHost(&pinned, max_size));
  auto* pageable = static_cast<char*>(std::malloc(max_size));
  if (!pageable) {
    std::fprintf(stderr, "cuxfer-calibrate: malloc(%llu) failed\n", static_cast<unsigned long long>(max_size));
    return 1;
  }
  std::memset(pageable, 1, max_size);
  std::memset(pinned, 1, max_size);
  Copier copier;
  for (uint64_t s = 4; s <= max_size; s *= 4) {
    for (int dir = 0; dir < 2; ++dir) {
      const int reps = reps_for(s, quick);
      p.pinned[dir].push_back(CopyPoint{s, copier.gbps(pinned, dev, s, dir == 0, reps)});
      p.pageable[dir].push_back(CopyPoint{s, copier.gbps(pageable, dev, s, dir == 0, reps)});
    }
  }
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFree(dev));

  for (uint64_t s = 1ull << 20; s <= max_size; s *= 4) {
    std::vector<double> reg, unreg;
    for (int r = 0; r < (quick ? 2 : 3); ++r) {
      const double t0 = now_us();
      CHECK(cudaHostRegister(pageable, s, cudaHostRegisterDefault));
      const double t1 = now_us();
      CHECK(cudaHostUnregister(pageable));
      reg.push_back(t1 - t0);
      unreg.push_back(now_us() - t1);
    }
    p.registration.push_back({s, median(reg), median(unreg)});
  }

  // Host memcpy between two fresh, touched buffers (not the one just
  // registered and unregistered above), as the staging threads copy.
  std::free(pageable);
  const uint64_t mbytes = std::min<uint64_t>(max_size, 256ull << 20);
  auto* src = static_cast<char*>(std::aligned_alloc(2u << 20, (mbytes + (2u << 20) - 1) & ~uint64_t((2u << 20) - 1)));
  auto* dst = static_cast<char*>(std::aligned_alloc(2u << 20, (mbytes + (2u << 20) - 1) & ~uint64_t((2u << 20) - 1)));
  if (!src || !dst) {
    std::fprintf(stderr, "cuxfer-calibrate: cannot allocate the memcpy buffers\n");
    return 1;
  }
  std::memset(src, 3, mbytes);
  std::memset(dst, 0, mbytes);
  for (unsigned t : {1u, 2u, 4u, 8u, 16u}) {
    if (t > std::max(1u, p.cores)) break;
    p.host_memcpy.push_back({t, memcpy_gbps(t, dst, src, mbytes)});
  }
  std::free(src);
  std::free(dst);
  std::fputs(cuxfer::model::machine_profile_json(p).c_str(), stdout);
  return 0;
}
