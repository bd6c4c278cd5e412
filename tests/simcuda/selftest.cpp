// Checks the simulated driver's semantics directly (no shim): the behaviours
// cuxfer's shim relies on when it classifies pointers and resolves entry
// points. Run with SIMCUDA_DEVICE_COUNT=2. Exits non-zero on the first failure.
#include <cuda.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_failures = 0;

#define EXPECT(cond)                                                      \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                       \
    }                                                                     \
  } while (0)
#define EXPECT_RC(call, want) EXPECT((call) == (want))
#define OK(call) EXPECT_RC(call, CUDA_SUCCESS)

template <typename F>
F sym(void* h, const char* name) {
  return reinterpret_cast<F>(dlsym(h, name));
}

}  // namespace

int main() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (!h) {
    std::fprintf(stderr, "cannot dlopen libcuda.so.1: %s\n", dlerror());
    return 1;
  }
  auto is_sim = sym<int (*)()>(h, "simcuda_is_simulated");
  EXPECT(is_sim && is_sim() == 1);

  // Before cuInit.
  int n = 0;
  EXPECT_RC(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  CUdeviceptr d0 = 0;
  EXPECT_RC(cuMemAlloc(&d0, 16), CUDA_ERROR_NOT_INITIALIZED);

  // --- cuGetProcAddress semantics -------------------------------------------
  auto gpa2 = sym<decltype(&cuGetProcAddress_v2)>(h, "cuGetProcAddress_v2");
  auto gpa1 = sym<CUresult (*)(const char*, void**, int, cuuint64_t)>(h, "cuGetProcAddress");
  EXPECT(gpa2 && gpa1);
  void* p = nullptr;
  CUdriverProcAddressQueryResult st{};
  OK(gpa2("cuGetProcAddress", &p, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  EXPECT(p == reinterpret_cast<void*>(gpa2) && st == CU_GET_PROC_ADDRESS_SUCCESS);
  OK(gpa2("cuGetProcAddress", &p, 11030, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  EXPECT(p == reinterpret_cast<void*>(gpa1));
  struct Want {
    const char* base;
    int version;
    cuuint64_t flags;
    const char* exported;
  };
  const Want wants[] = {
      {"cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_DEFAULT, "cuMemcpyHtoD_v2"},
      {"cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpyHtoD_v2_ptds"},
      {"cuMemcpyHtoD", 2000, CU_GET_PROC_ADDRESS_DEFAULT, "cuMemcpyHtoD"},
      {"cuMemcpyHtoDAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpyHtoDAsync_v2_ptsz"},
      {"cuMemcpyDtoHAsync", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemcpyDtoHAsync_v2"},
      {"cuMemcpy", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpy_ptds"},
      {"cuMemcpyAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpyAsync_ptsz"},
      {"cuMemcpyBatchAsync", 13000, CU_GET_PROC_ADDRESS_DEFAULT, "cuMemcpyBatchAsync_v2"},
      {"cuMemcpyBatchAsync", 12080, CU_GET_PROC_ADDRESS_DEFAULT, "cuMemcpyBatchAsync"},
      {"cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemAlloc_v2"},
      {"cuMemHostRegister", 12000, CU_GET_PROC_ADDRESS_DEFAULT, "cuMemHostRegister_v2"},
      {"cuMemsetD8Async", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemsetD8Async_ptsz"},
      {"cuCtxCreate", 13000, CU_GET_PROC_ADDRESS_DEFAULT, "cuCtxCreate_v4"},
  };
  for (const Want& w : wants) {
    p = nullptr;
    CUresult r = gpa2(w.base, &p, w.version, w.flags, &st);
    void* expect = dlsym(h, w.exported);
    if (r != CUDA_SUCCESS || p == nullptr || p != expect) {
      std::fprintf(stderr, "FAILED: cuGetProcAddress(%s, %d, %llu) != %s\n", w.base, w.version,
                   static_cast<unsigned long long>(w.flags), w.exported);
      ++g_failures;
    }
  }
  p = reinterpret_cast<void*>(1);
  EXPECT_RC(gpa2("cuNoSuchThing", &p, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
  EXPECT(p == nullptr && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  EXPECT_RC(gpa2("cuMemcpyHtoD_v2", &p, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);  // base names only
  EXPECT_RC(gpa2("cuMemCreate", &p, 9000, 0, &st), CUDA_ERROR_NOT_FOUND);
  EXPECT(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  const void* table = nullptr;
  CUuuid id{};
  EXPECT_RC(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);

  // --- init, devices, contexts ----------------------------------------------
  OK(cuInit(0));
  OK(cuDeviceGetCount(&n));
  EXPECT(n == 2);
  CUdevice dev = 0;
  OK(cuDeviceGet(&dev, 0));
  EXPECT_RC(cuDeviceGet(&dev, 5), CUDA_ERROR_INVALID_DEVICE);
  EXPECT_RC(cuMemAlloc(&d0, 16), CUDA_ERROR_INVALID_CONTEXT);  // no current context yet
  CUcontext ctx = nullptr, ctx1 = nullptr;
  OK(cuDevicePrimaryCtxRetain(&ctx, 0));
  OK(cuDevicePrimaryCtxRetain(&ctx1, 1));
  OK(cuCtxSetCurrent(ctx));
  CUcontext cur = nullptr;
  OK(cuCtxGetCurrent(&cur));
  EXPECT(cur == ctx);

  // --- memory kinds and pointer attributes ------------------------------------
  const size_t kN = 1 << 20;
  CUdeviceptr d = 0, m = 0;
  OK(cuMemAlloc(&d, kN));
  OK(cuMemAllocManaged(&m, kN, CU_MEM_ATTACH_GLOBAL));
  void* pinned = nullptr;
  OK(cuMemHostAlloc(&pinned, kN, CU_MEMHOSTALLOC_DEVICEMAP));
  std::vector<char> pageable(kN, 7);
  std::vector<char> reg(kN, 9);
  OK(cuMemHostRegister(reg.data(), kN, 0));
  EXPECT_RC(cuMemHostRegister(reg.data() + 100, 10, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);

  unsigned type = 99;
  OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d + 123));  // interior pointer
  EXPECT(type == CU_MEMORYTYPE_DEVICE);
  OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(pinned)));
  EXPECT(type == CU_MEMORYTYPE_HOST);
  OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(reg.data() + 5)));
  EXPECT(type == CU_MEMORYTYPE_HOST);
  EXPECT_RC(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<CUdeviceptr>(pageable.data())),
            CUDA_ERROR_INVALID_VALUE);
  int managed = 0;
  OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
  EXPECT(managed == 1);
  CUdeviceptr start = 0;
  size_t size = 0;
  OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 4096));
  OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 4096));
  EXPECT(start == d && size == kN);
  {
    unsigned t = 99;
    int mg = 99, ord = 99;
    void* hp = reinterpret_cast<void*>(1);
    CUpointer_attribute a[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                               CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_HOST_POINTER};
    void* v[] = {&t, &mg, &ord, &hp};
    OK(cuPointerGetAttributes(4, a, v, reinterpret_cast<CUdeviceptr>(pageable.data())));
    EXPECT(t == 0 && mg == 0 && hp == nullptr);  // unknown memory: success, null values
    OK(cuPointerGetAttributes(4, a, v, d + 1));
    EXPECT(t == CU_MEMORYTYPE_DEVICE && ord == 0 && hp == nullptr);
  }

  // --- typed copies validate; unified copies infer -----------------------------
  std::vector<char> back(kN, 0);
  OK(cuMemcpyHtoD(d, pageable.data(), kN));
  OK(cuMemcpyDtoH(back.data(), d, kN));
  EXPECT(std::memcmp(back.data(), pageable.data(), kN) == 0);
  EXPECT_RC(cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(back.data()), pageable.data(), 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_RC(cuMemcpyHtoD(d + kN - 8, pageable.data(), 16), CUDA_ERROR_INVALID_VALUE);  // past the end
  EXPECT_RC(cuMemcpyDtoH(back.data(), reinterpret_cast<CUdeviceptr>(pageable.data()), 16), CUDA_ERROR_INVALID_VALUE);
  OK(cuMemcpy(m, d, kN));
  EXPECT(std::memcmp(reinterpret_cast<void*>(m), pageable.data(), kN) == 0);
  OK(cuMemcpy(reinterpret_cast<CUdeviceptr>(pinned), m, kN));
  OK(cuMemcpyHtoDAsync(d, reg.data(), kN, CU_STREAM_PER_THREAD));
  CUstream s = nullptr;
  OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  OK(cuMemcpyDtoHAsync(back.data(), d, kN, s));
  EXPECT(std::memcmp(back.data(), reg.data(), kN) == 0);
  EXPECT_RC(cuMemcpyDtoHAsync(back.data(), d, 16, reinterpret_cast<CUstream>(0x1234)), CUDA_ERROR_INVALID_HANDLE);
  OK(cuStreamSynchronize(s));

  // 2D copy with pitches.
  CUdeviceptr pd = 0;
  size_t pitch = 0;
  OK(cuMemAllocPitch(&pd, &pitch, 1000, 8, 4));
  EXPECT(pitch == 1024);
  std::vector<char> h2(1100 * 8), h3(1100 * 8, 0);
  for (size_t i = 0; i < h2.size(); ++i) h2[i] = static_cast<char>(i * 7);
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = h2.data();
  c.srcPitch = 1100;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = pd;
  c.dstPitch = pitch;
  c.WidthInBytes = 1000;
  c.Height = 8;
  OK(cuMemcpy2D(&c));
  CUDA_MEMCPY2D b{};
  b.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  b.srcDevice = pd;
  b.srcPitch = pitch;
  b.dstMemoryType = CU_MEMORYTYPE_HOST;
  b.dstHost = h3.data();
  b.dstPitch = 1100;
  b.WidthInBytes = 1000;
  b.Height = 8;
  OK(cuMemcpy2D(&b));
  for (size_t y = 0; y < 8; ++y) EXPECT(std::memcmp(&h2[y * 1100], &h3[y * 1100], 1000) == 0);

  // Memsets.
  OK(cuMemsetD32(d, 0xdeadbeef, kN / 4));
  EXPECT(reinterpret_cast<unsigned*>(d)[kN / 4 - 1] == 0xdeadbeef);
  OK(cuMemsetD8Async(d, 1, 10, s));
  EXPECT(reinterpret_cast<unsigned char*>(d)[9] == 1);

  // Peer.
  OK(cuCtxSetCurrent(ctx1));
  CUdeviceptr d1 = 0;
  OK(cuMemAlloc(&d1, kN));
  int ord = -1;
  OK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, d1));
  EXPECT(ord == 1);
  OK(cuMemcpyPeer(d1, ctx1, d, ctx, kN));
  EXPECT(std::memcmp(reinterpret_cast<void*>(d1), reinterpret_cast<void*>(d), kN) == 0);
  OK(cuCtxSetCurrent(ctx));

  // Batch.
  {
    CUdeviceptr dsts[2] = {d, reinterpret_cast<CUdeviceptr>(back.data())};
    CUdeviceptr srcs[2] = {reinterpret_cast<CUdeviceptr>(pageable.data()), d};
    size_t sizes[2] = {kN, kN};
    CUmemcpyAttributes attr{};
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t idx = 0;
    OK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, &idx, 1, s));
    EXPECT(std::memcmp(back.data(), pageable.data(), kN) == 0);
  }

  // VMM: reserve, create, map, set access, alias through a second mapping.
  {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    size_t gran = 0;
    OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUmemGenericAllocationHandle hnd = 0;
    OK(cuMemCreate(&hnd, gran, &prop, 0));
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    OK(cuMemMap(va, gran, 0, hnd, 0));
    OK(cuMemMap(va + gran, gran, 0, hnd, 0));
    EXPECT_RC(cuMemcpyHtoD(va, pageable.data(), 16), CUDA_ERROR_INVALID_VALUE);  // no access yet
    CUmemAccessDesc acc{};
    acc.location = prop.location;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    OK(cuMemSetAccess(va, 2 * gran, &acc, 1));
    OK(cuMemcpyHtoD(va, pageable.data(), 4096));
    EXPECT(std::memcmp(reinterpret_cast<void*>(va + gran), pageable.data(), 4096) == 0);  // aliased
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + gran + 5));
    EXPECT(type == CU_MEMORYTYPE_DEVICE);
    OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + gran + 5));
    EXPECT(start == va);
    OK(cuMemRelease(hnd));
    OK(cuMemUnmap(va, 2 * gran));
    OK(cuMemAddressFree(va, 2 * gran));
  }

  // Events and host functions.
  CUevent e0 = nullptr, e1 = nullptr;
  OK(cuEventCreate(&e0, 0));
  OK(cuEventCreate(&e1, 0));
  OK(cuEventRecord(e0, s));
  OK(cuEventRecord(e1, s));
  float ms = -1;
  OK(cuEventElapsedTime(&ms, e0, e1));
  EXPECT(ms >= 0);
  int ran = 0;
  OK(cuLaunchHostFunc(s, [](void* u) { *static_cast<int*>(u) = 1; }, &ran));
  EXPECT(ran == 1);
  OK(cuEventDestroy(e0));
  OK(cuEventDestroy(e1));

  // Error strings.
  const char* name = nullptr;
  OK(cuGetErrorName(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, &name));
  EXPECT(name && std::string(name) == "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED");

  // Frees.
  OK(cuMemHostUnregister(reg.data()));
  EXPECT_RC(cuMemHostUnregister(reg.data()), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  OK(cuMemFreeHost(pinned));
  OK(cuMemFree(d));
  EXPECT_RC(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);
  EXPECT_RC(cuMemcpyHtoD(d, pageable.data(), 16), CUDA_ERROR_INVALID_VALUE);  // freed
  OK(cuMemFree(m));
  OK(cuMemFree(pd));
  OK(cuMemFree(d1));
  OK(cuStreamDestroy(s));
  size_t freeb = 0, total = 0;
  OK(cuMemGetInfo(&freeb, &total));
  EXPECT(freeb == total);

  // Releasing a primary context's last reference resets it: what it held is freed.
  {
    CUcontext c1 = nullptr, again = nullptr;
    OK(cuCtxSetCurrent(ctx1));
    OK(cuDevicePrimaryCtxRetain(&again, 1));  // two references now
    CUdeviceptr kept = 0;
    void* host = nullptr;
    OK(cuMemAlloc(&kept, 4096));
    OK(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_PORTABLE));
    OK(cuDevicePrimaryCtxRelease(1));  // not the last: nothing happens
    unsigned flags = 0;
    int active = 0;
    OK(cuDevicePrimaryCtxGetState(1, &flags, &active));
    EXPECT(active == 1);
    OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, kept));
    OK(cuDevicePrimaryCtxRelease(1));  // the last one: reset
    OK(cuDevicePrimaryCtxGetState(1, &flags, &active));
    EXPECT(active == 0);
    EXPECT_RC(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, kept), CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(host)),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_RC(cuDevicePrimaryCtxRelease(1), CUDA_ERROR_INVALID_CONTEXT);
    OK(cuDevicePrimaryCtxRetain(&c1, 1));  // usable again
    EXPECT(c1 == ctx1);
    OK(cuMemAlloc(&kept, 4096));
    OK(cuMemFree(kept));
    OK(cuDevicePrimaryCtxRelease(1));
    OK(cuCtxSetCurrent(ctx));
  }

  // A destroyed context and its events are freed memory in the real driver:
  // binding the context or using an event of it aborts here, loudly (the
  // shim must never do either). Each use in a child of its own.
  {
    CUcontext alive_ctx = nullptr;
    OK(cuCtxGetCurrent(&alive_ctx));
    CUcontext live = nullptr;
    CUevent live_event = nullptr;
    OK(cuCtxCreate(&live, nullptr, 0, 0));
    OK(cuEventCreate(&live_event, 0));
    OK(cuEventRecord(live_event, nullptr));
    OK(cuCtxSetCurrent(alive_ctx));
    // An event of a live context, with another current: usable, but not on
    // the current context's stream ("event and stream must be on the same
    // CUDA context").
    EXPECT_RC(cuEventRecord(live_event, nullptr), CUDA_ERROR_INVALID_HANDLE);
    OK(cuEventQuery(live_event));
    OK(cuEventDestroy(live_event));
    OK(cuCtxDestroy(live));
    enum Use { Bind, Record, Query, Synchronize, Destroy, Elapsed, Wait, Uses };
    for (int use = Bind; use < Uses; ++use) {
      std::fflush(nullptr);
      const pid_t pid = fork();
      if (pid == 0) {
        CUcontext gone = nullptr;
        CUevent dead = nullptr, other = nullptr;
        if (cuCtxCreate(&gone, nullptr, 0, 0) != CUDA_SUCCESS || cuEventCreate(&dead, 0) != CUDA_SUCCESS ||
            cuCtxDestroy(gone) != CUDA_SUCCESS || cuCtxSetCurrent(alive_ctx) != CUDA_SUCCESS ||
            cuEventCreate(&other, 0) != CUDA_SUCCESS)
          _exit(3);
        float ms = 0;
        switch (use) {
          case Bind: cuCtxSetCurrent(gone); break;
          case Record: cuEventRecord(dead, nullptr); break;
          case Query: cuEventQuery(dead); break;
          case Synchronize: cuEventSynchronize(dead); break;
          case Destroy: cuEventDestroy(dead); break;
          case Elapsed: cuEventElapsedTime(&ms, other, dead); break;
          case Wait: cuStreamWaitEvent(nullptr, dead, 0); break;
        }
        _exit(0);  // not aborted: a failure
      }
      int status = 0;
      EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid);
      EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
      if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT)) std::fprintf(stderr, "  use %d did not abort\n", use);
    }
  }

  // Context-bound calls as the real driver answers them: cuCtxSynchronize
  // needs a current context; a thread whose current context another thread
  // destroyed is told so; cuMemFreeHost is not bound to the current context
  // (the pointer says whose it is), and null is a no-op.
  {
    CUcontext alive_ctx = nullptr;
    OK(cuCtxGetCurrent(&alive_ctx));
    void* host = nullptr;
    OK(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    CUcontext other = nullptr;
    OK(cuCtxCreate(&other, nullptr, 0, 0));
    OK(cuCtxSynchronize());
    CUresult sync_after_destroy = CUDA_SUCCESS, sync_without = CUDA_SUCCESS, free_without = CUDA_ERROR_UNKNOWN;
    std::thread([&] {
      if (cuCtxSetCurrent(other) != CUDA_SUCCESS) return;
      if (cuCtxPopCurrent(nullptr) != CUDA_SUCCESS) return;
      sync_without = cuCtxSynchronize();
      free_without = cuMemFreeHost(host);  // made in alive_ctx, none current here
    }).join();
    EXPECT(sync_without == CUDA_ERROR_INVALID_CONTEXT);
    EXPECT(free_without == CUDA_SUCCESS);
    OK(cuMemFreeHost(nullptr));
    std::atomic<int> step{0};
    std::thread bound([&] {
      if (cuCtxSetCurrent(other) != CUDA_SUCCESS) return;
      step = 1;
      while (step.load() != 2) std::this_thread::yield();
      sync_after_destroy = cuCtxSynchronize();
    });
    while (step.load() != 1) std::this_thread::yield();
    OK(cuCtxDestroy(other));  // current to the other thread
    step = 2;
    bound.join();
    EXPECT(sync_after_destroy == CUDA_ERROR_CONTEXT_IS_DESTROYED);
    OK(cuCtxSetCurrent(alive_ctx));
  }

  if (g_failures) {
    std::fprintf(stderr, "simcuda selftest: %d failure(s)\n", g_failures);
    return 1;
  }
  std::printf("simcuda selftest: all checks passed\n");
  return 0;
}
