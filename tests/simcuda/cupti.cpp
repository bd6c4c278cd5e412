// simcupti: a stand-in libcupti.so.13 for the simulated CUDA, enough of the
// activity API to test how the shim shares CUPTI with an application's own
// profiler. A test double, never installed.
//
// It behaves as CUPTI does where the tests depend on it:
//   - one set of buffer callbacks per process; registering replaces them;
//   - buffers are requested lazily, when the first record needs one;
//   - a flush completes the outstanding buffers through the callbacks that are
//     registered at the time of the flush, whoever requested them (this is
//     how a profiler that registers late receives buffers it never gave out);
//   - one callback subscriber at a time.
// Records are memcpy records the test program asks for with simcupti_emit.
#include <cupti.h>
#include <pthread.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace {

struct Outstanding {
  uint8_t* buffer;
  size_t size;
  size_t valid;
};

std::mutex g_mutex;
CUpti_BuffersCallbackRequestFunc g_requested = nullptr;
CUpti_BuffersCallbackCompleteFunc g_completed = nullptr;
CUpti_TimestampCallbackFunc g_timestamp = nullptr;
std::vector<Outstanding> g_buffers;
bool g_memcpy_enabled = false;
bool g_subscribed = false;
uint64_t g_fake_clock = 1000;

uint64_t timestamp() { return g_timestamp ? g_timestamp() : (g_fake_clock += 1000); }

// The microseconds environment variable `name` gives (0 when unset), for the
// test hooks that make a call slow; each caller reads it once, into a static.
long delay_us(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::strtol(v, nullptr, 10) : 0L;
}
void sleep_us(long us) {
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

// SIMCUPTI_FORK_LOCK=1: a driver lock that the stand-in's own fork handler
// takes and its flush needs to hand buffers back, as a real driver's might.
// The handler is registered at the first CUPTI call, after the shim's
// (registered when the shim loads), so it runs first at a fork: a fork while
// the shim's writer sits inside the flush holding a lock of its own finds the
// driver lock taken by the forking thread, and the shim's handler must not
// wait for that lock of its own without end.
std::mutex g_driver_lock;
bool fork_lock_model() {
  static const bool on = [] {
    const char* v = std::getenv("SIMCUPTI_FORK_LOCK");
    if (!v || std::strcmp(v, "1") != 0) return false;
    pthread_atfork([] { g_driver_lock.lock(); }, [] { g_driver_lock.unlock(); }, [] { g_driver_lock.unlock(); });
    return true;
  }();
  return on;
}

}  // namespace

extern "C" {

// Test hook: whether a subscriber's buffer callbacks are registered (CUPTI
// attached: cuptiFinalize forgets them).
__attribute__((visibility("default"))) int simcupti_attached() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_requested != nullptr;
}

// Test hook: one memcpy record of `bytes` with `correlation_id`, if memcpy
// records are enabled and someone registered callbacks. Returns 1 if recorded.
__attribute__((visibility("default"))) int simcupti_emit(uint64_t bytes, uint32_t correlation_id) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_memcpy_enabled || !g_requested) return 0;
  if (g_buffers.empty() || g_buffers.back().size - g_buffers.back().valid < sizeof(CUpti_ActivityMemcpy6)) {
    uint8_t* b = nullptr;
    size_t size = 0, max_records = 0;
    g_requested(&b, &size, &max_records);
    if (!b || size < sizeof(CUpti_ActivityMemcpy6)) return 0;
    g_buffers.push_back({b, size, 0});
  }
  Outstanding& o = g_buffers.back();
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = bytes;
  m.start = timestamp();
  m.end = timestamp();
  m.correlationId = correlation_id;
  std::memcpy(o.buffer + o.valid, &m, sizeof m);
  o.valid += sizeof m;
  return 1;
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                           CUpti_BuffersCallbackCompleteFunc completed) {
  if (!requested || !completed) return CUPTI_ERROR_INVALID_PARAMETER;
  fork_lock_model();
  std::lock_guard<std::mutex> lock(g_mutex);
  g_requested = requested;
  g_completed = completed;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc now) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_timestamp = now;
  return CUPTI_SUCCESS;
}

// SIMCUPTI_ENABLE_DELAY_US: memcpy records start at once but the enable
// returns that much later, as a real enable (or one under a sanitizer) may:
// copies the app makes meanwhile get records their hooks did not expect.
CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (kind != CUPTI_ACTIVITY_KIND_MEMCPY) return CUPTI_SUCCESS;
    g_memcpy_enabled = true;
  }
  static const long us = delay_us("SIMCUPTI_ENABLE_DELAY_US");
  sleep_us(us);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (kind == CUPTI_ACTIVITY_KIND_MEMCPY) g_memcpy_enabled = false;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  std::vector<Outstanding> done;
  CUpti_BuffersCallbackCompleteFunc completed;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    completed = g_completed;
    if (!completed) return CUPTI_SUCCESS;
    for (auto it = g_buffers.begin(); it != g_buffers.end();) {
      if (it->valid > 0 || (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)) {
        done.push_back(*it);
        it = g_buffers.erase(it);
      } else {
        ++it;
      }
    }
  }
  // SIMCUPTI_FLUSH_DELAY_US: the flush hands its buffers back that much later,
  // as a real one may when it waits for the GPU: the caller sits inside the
  // flush (with whatever it holds) before its completion callback runs.
  static const long us = delay_us("SIMCUPTI_FLUSH_DELAY_US");
  if (!done.empty()) sleep_us(us);
  // SIMCUPTI_FORCED_FLUSH_DELAY_US: a forced flush takes that long whatever
  // it hands back, as a real one waits for the GPU's work in flight (the
  // shim's final flush when the process ends).
  static const long forced_us = delay_us("SIMCUPTI_FORCED_FLUSH_DELAY_US");
  if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) sleep_us(forced_us);
  std::unique_lock<std::mutex> driver(g_driver_lock, std::defer_lock);
  if (fork_lock_model()) driver.lock();
  for (const Outstanding& o : done) completed(nullptr, 0, o.buffer, o.size, o.valid);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  uint8_t* next = *record ? reinterpret_cast<uint8_t*>(*record) + sizeof(CUpti_ActivityMemcpy6) : buffer;
  if (next + sizeof(CUpti_ActivityMemcpy6) > buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityConfigureUnifiedMemoryCounter(CUpti_ActivityUnifiedMemoryCounterConfig*, uint32_t) {
  return CUPTI_ERROR_NOT_SUPPORTED;
}

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_subscribed) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_subscribed = true;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_subscribed);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_subscribed = false;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "simcupti error";
  return CUPTI_SUCCESS;
}

// Ends every activity and forgets the callbacks; outstanding buffers are
// completed first, as a flush would.
CUptiResult cuptiFinalize() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_requested = nullptr;
  g_completed = nullptr;
  g_timestamp = nullptr;
  g_memcpy_enabled = false;
  return CUPTI_SUCCESS;
}

}  // extern "C"
