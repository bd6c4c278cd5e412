#include "record/cupti_collector.h"
#include "core/export.h"

#include <cupti.h>
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>

#include <cstdlib>

#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/quiet_thread.h"
#include "symbols/symbol_table.h"

namespace cuxfer::shim {
namespace {

// The libcupti entry points we use, resolved with dlsym from the handle.
struct CuptiApi {
  decltype(&cuptiActivityEnable) activity_enable = nullptr;
  decltype(&cuptiActivityDisable) activity_disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp = nullptr;
  decltype(&cuptiSubscribe_v2) subscribe_v2 = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityConfigureUnifiedMemoryCounter) configure_um = nullptr;
  decltype(&cuptiFinalize) finalize = nullptr;
  decltype(&cuptiGetContextId) context_id = nullptr;
  decltype(&cuptiGetStreamIdEx) stream_id = nullptr;
};
CuptiApi g_api;

constexpr size_t kBufferBytes = 4u << 20;

std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  if (g_api.result_string) g_api.result_string(r, &s);
  return s ? s : ("CUPTI error " + std::to_string(static_cast<int>(r)));
}

trace::MemKind map_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: return trace::MemKind::Pageable;
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED: return trace::MemKind::Pinned;
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: return trace::MemKind::Device;
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: return trace::MemKind::Array;
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: return trace::MemKind::Managed;
    default: return trace::MemKind::Unknown;
  }
}

// The fields memcpy and memset records share.
template <typename Record>
trace::GpuRecord common_fields(const Record& m, trace::GpuRecordKind kind) {
  trace::GpuRecord g{};
  g.kind = static_cast<uint8_t>(kind);
  g.start_ns = m.start;
  g.end_ns = m.end;
  g.bytes = m.bytes;
  g.cupti_correlation_id = m.correlationId;
  g.stream_id = m.streamId;
  g.device = m.deviceId;
  return g;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (buffer && valid) CuptiCollector::instance().consume_buffer(buffer, valid);
  std::free(buffer);
}

uint64_t CUPTIAPI timestamp_now() { return now_ns(); }

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

template <typename F>
bool load(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(real_dlsym(lib, name));
  return out != nullptr;
}

// The candidates are tried in order (record/cupti_locate.h); the first that
// opens wins. A candidate that is no file is skipped without a dlopen, so
// that the list of what was tried stays short and readable.
void* open_libcupti(const std::vector<CuptiCandidate>& candidates, const CuptiCandidate*& chosen,
                    std::string& tried) {
  for (const auto& c : candidates) {
    const bool bare = c.path.find('/') == std::string::npos;
    if (!bare && ::access(c.path.c_str(), R_OK) != 0) continue;
    if (void* h = dlopen(c.path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      chosen = &c;
      return h;
    }
    if (!tried.empty()) tried += "; ";
    const char* err = dlerror();
    tried += err ? err : c.path;
  }
  return nullptr;
}

}  // namespace

CUXFER_HOT CuptiCollector& CuptiCollector::instance() {
  static CuptiCollector* c = new CuptiCollector;  // outlives every static destructor
  return *c;
}

bool CuptiCollector::start(const std::vector<CuptiCandidate>& candidates, std::string& reason) {
  // Threads libcupti starts while it is loaded and enabled inherit this
  // thread's mask: all signals blocked, so the app's handlers stay on its own.
  AllSignalsBlocked quiet;
  std::lock_guard<RankedMutex> handover(handover_mutex_);
  if (!app_owner_.empty()) {
    reason = "the application's own profiler holds CUPTI (" + app_owner_ + ")";
    return false;
  }
  std::string tried;
  const CuptiCandidate* chosen = nullptr;
  void* lib = open_libcupti(candidates, chosen, tried);
  if (!lib) {
    reason = "libcupti.so.13 not found (" + (tried.empty() ? std::string("no candidate exists") : tried) +
             "); install the nvidia-cuda-cupti wheel or the CUDA toolkit, or set CUXFER_CUPTI_LIB";
    return false;
  }
  lib_ = lib;
  char origin[PATH_MAX] = "";
  library_ = dlinfo(lib, RTLD_DI_ORIGIN, origin) == 0 && chosen->path.find('/') == std::string::npos
                 ? std::string(origin) + "/" + chosen->path
                 : chosen->path;
  library_why_ = chosen->why;
  bool ok = load(lib, "cuptiActivityEnable", g_api.activity_enable) &&
            load(lib, "cuptiActivityDisable", g_api.activity_disable) &&
            load(lib, "cuptiActivityRegisterCallbacks", g_api.register_callbacks) &&
            load(lib, "cuptiActivityFlushAll", g_api.flush_all) &&
            load(lib, "cuptiActivityGetNextRecord", g_api.next_record) &&
            load(lib, "cuptiSubscribe", g_api.subscribe) &&
            load(lib, "cuptiUnsubscribe", g_api.unsubscribe);
  load(lib, "cuptiGetResultString", g_api.result_string);
  load(lib, "cuptiSubscribe_v2", g_api.subscribe_v2);
  load(lib, "cuptiActivityRegisterTimestampCallback", g_api.register_timestamp);
  load(lib, "cuptiActivityConfigureUnifiedMemoryCounter", g_api.configure_um);
  load(lib, "cuptiFinalize", g_api.finalize);
  load(lib, "cuptiGetContextId", g_api.context_id);
  load(lib, "cuptiGetStreamIdEx", g_api.stream_id);
  if (!ok) {
    reason = "libcupti lacks the activity API cuxfer needs (too old?)";
    return false;
  }

  // CUPTI allows one subscriber per process. Probe for another one (an app's
  // own profiler, nsys, ncu) and step aside if present: the app's profiler
  // must keep working. The probe subscription is released at once so that a
  // profiler the app starts later can still subscribe.
  CUpti_SubscriberHandle probe = nullptr;
  CUptiResult r;
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {0};
  if (g_api.subscribe_v2) {
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "cuxfer";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof holder;
    r = g_api.subscribe_v2(&probe, ignore_callback, nullptr, &params);
  } else {
    r = g_api.subscribe(&probe, ignore_callback, nullptr);
  }
  if (r != CUPTI_SUCCESS) {
    reason = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
                 ? std::string("another CUPTI subscriber holds CUPTI") +
                       (holder[0] ? std::string(" (") + holder + ")" : std::string())
                 : "cuptiSubscribe failed: " + result_text(r);
    return false;
  }
  g_api.unsubscribe(probe);

  enabled_kinds_ = {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
  if (!attach(reason)) {
    enabled_kinds_.clear();
    return false;
  }
  // Kernels (CUXFER_CUPTI_KERNELS=1): concurrent-kernel records keep kernel
  // concurrency (CUPTI_ACTIVITY_KIND_KERNEL would serialize kernels).
  if (config().cupti_kernels) {
    r = g_api.activity_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (r != CUPTI_SUCCESS)
      reason = "kernel records unavailable: " + result_text(r);
    else
      enabled_kinds_.push_back(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  if (!g_api.register_timestamp) {
    reason = "libcupti has no timestamp callback; GPU times may be offset";
  }
  g_hot_line.cupti_active.store(true, std::memory_order_release);
  return true;
}

bool CuptiCollector::attach(std::string& reason) {
  if (g_api.register_timestamp) g_api.register_timestamp(timestamp_now);
  CUptiResult r = g_api.register_callbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    reason = "cuptiActivityRegisterCallbacks failed: " + result_text(r);
    return false;
  }
  for (int kind : enabled_kinds_) {
    r = g_api.activity_enable(static_cast<CUpti_ActivityKind>(kind));
    if (r != CUPTI_SUCCESS) {
      reason = "cuptiActivityEnable failed: " + result_text(r);
      return false;
    }
  }
  return true;
}

bool CuptiCollector::enable_unified_memory(std::string& reason) {
  std::lock_guard<RankedMutex> handover(handover_mutex_);
  if (!active()) {
    reason = "CUPTI is not active";
    return false;
  }
  // Unified-memory records need CUPTI attached for the rest of the run.
  if (detached() && !attach(reason)) return false;
  detached_.store(false, std::memory_order_release);
  if (!g_api.configure_um) {
    reason = "libcupti lacks cuptiActivityConfigureUnifiedMemoryCounter";
    return false;
  }
  CUpti_ActivityUnifiedMemoryCounterConfig config[4] = {};
  const CUpti_ActivityUnifiedMemoryCounterKind kinds[4] = {
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
      CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT};
  for (int i = 0; i < 4; ++i) {
    config[i].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
    config[i].kind = kinds[i];
    config[i].deviceId = 0;
    config[i].enable = 1;
  }
  CUptiResult r = g_api.configure_um(config, 4);
  if (r != CUPTI_SUCCESS) {
    reason = "unified-memory counters not supported here: " + result_text(r);
    return false;
  }
  r = g_api.activity_enable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
  if (r != CUPTI_SUCCESS) {
    reason = "cuptiActivityEnable(unified memory) failed: " + result_text(r);
    return false;
  }
  enabled_kinds_.push_back(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
  return true;
}

bool CuptiCollector::set_copy_records(bool on) {
  std::lock_guard<RankedMutex> handover(handover_mutex_);
  if (!active() || !g_api.activity_enable || !g_api.activity_disable) return false;
  if (detached()) {
    if (!on) return true;  // off already: detached
    std::string reason;
    if (!attach(reason)) return false;  // the kinds are the ones detach() found: memcpy and memset
    detached_.store(false, std::memory_order_release);
    return true;
  }
  bool ok = true;
  for (auto kind : {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET})
    ok = (on ? g_api.activity_enable(kind) : g_api.activity_disable(kind)) == CUPTI_SUCCESS && ok;
  return ok;
}

bool CuptiCollector::detach() {
  std::lock_guard<RankedMutex> handover(handover_mutex_);
  if (!active() || detached() || !g_api.finalize) return false;
  for (int kind : enabled_kinds_)
    if (kind != CUPTI_ACTIVITY_KIND_MEMCPY && kind != CUPTI_ACTIVITY_KIND_MEMSET) return false;
  // The records are off; what CUPTI still holds comes back first, partly
  // filled buffers too, so nothing recorded before is lost.
  g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (g_api.finalize() != CUPTI_SUCCESS) return false;
  detached_.store(true, std::memory_order_release);
  return true;
}

void* CuptiCollector::own_symbol(const char* name) const {
  return lib_ ? real_dlsym(lib_, name) : nullptr;
}

bool CuptiCollector::hand_over(const char* call, const void* real) {
  std::lock_guard<RankedMutex> handover(handover_mutex_);
  if (!lib_) {
    // Not started yet (or never will be): leave CUPTI to the app for good.
    if (app_owner_.empty()) app_owner_ = call;
    return false;
  }
  if (!active() || real != own_symbol(call)) return false;  // another libcupti: ours is untouched
  if (detached()) {
    // Detached, everything already flushed: a CUPTI call now would attach it
    // again for us. The app's call attaches it for the app.
    g_hot_line.cupti_active.store(false, std::memory_order_release);
    return true;
  }
  // Disable first so nothing new lands in our buffers, then have every buffer
  // CUPTI holds (partly filled ones too) completed into our callback.
  for (int kind : enabled_kinds_) g_api.activity_disable(static_cast<CUpti_ActivityKind>(kind));
  g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_hot_line.cupti_active.store(false, std::memory_order_release);
  return true;
}

void CuptiCollector::flush(bool forced) {
  // Under the lock: a flush must not race a detach (or an attach) of CUPTI.
  std::lock_guard<RankedMutex> handover(handover_mutex_);
  if (active() && !detached()) g_api.flush_all(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

bool CuptiCollector::ignore_stream_of(CUctx_st* ctx, CUstream_st* stream) {
  // Every CUPTI call the collector makes is serialized with the writer's
  // detach (cuptiFinalize) and a hand-over to the app's profiler.
  std::lock_guard<RankedMutex> handover(handover_mutex_);
  if (!active() || detached() || !g_api.context_id || !g_api.stream_id) return false;
  uint32_t context_id = 0, stream_id = 0;
  if (g_api.context_id(ctx, &context_id) != CUPTI_SUCCESS ||
      g_api.stream_id(ctx, stream, 0, &stream_id) != CUPTI_SUCCESS)
    return false;
  const uint32_t slot = ignored_count_.load(std::memory_order_acquire);
  if (slot >= kMaxIgnored) return false;
  // One warm-up at a time (cupti_warmup.cpp claims its context first): the
  // slot is ours; published before the count that makes it visible.
  ignored_[slot].store((uint64_t{context_id} << 32) | stream_id, std::memory_order_release);
  ignored_live_.fetch_add(1, std::memory_order_acq_rel);
  ignored_count_.store(slot + 1, std::memory_order_release);
  return true;
}

bool CuptiCollector::take_ignored(uint32_t context_id, uint32_t stream_id) {
  if (ignored_live_.load(std::memory_order_acquire) == 0) return false;  // every record: one load
  const uint32_t n = ignored_count_.load(std::memory_order_acquire);
  const uint64_t key = (uint64_t{context_id} << 32) | stream_id;
  // Single use: the warm-up makes one copy, so its entry goes with its one
  // record (a stream id CUPTI gave again later is the app's).
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t expected = key;
    if (ignored_[i].load(std::memory_order_acquire) == key &&
        ignored_[i].compare_exchange_strong(expected, kIgnoredUsed, std::memory_order_acq_rel)) {
      ignored_live_.fetch_sub(1, std::memory_order_acq_rel);
      return true;
    }
  }
  return false;
}

void CuptiCollector::consume_buffer(uint8_t* buffer, size_t valid) {
  std::vector<trace::GpuRecord> got;
  CUpti_Activity* rec = nullptr;
  while (g_api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
    trace::GpuRecord g{};
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(rec);
        if (take_ignored(m->contextId, m->streamId)) {
          ignored_records_.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        g = common_fields(*m, trace::GpuRecordKind::Memcpy);
        g.cupti_copy_kind = m->copyKind;
        g.src_kind = static_cast<uint8_t>(map_kind(m->srcKind));
        g.dst_kind = static_cast<uint8_t>(map_kind(m->dstKind));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(rec);
        g = common_fields(*m, trace::GpuRecordKind::Memset);
        g.dst_kind = static_cast<uint8_t>(map_kind(static_cast<uint8_t>(m->memoryKind)));
        break;
      }
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(rec);
        g.kind = static_cast<uint8_t>(trace::GpuRecordKind::Kernel);
        g.start_ns = k->start;
        g.end_ns = k->end;
        g.cupti_correlation_id = k->correlationId;
        g.stream_id = k->streamId;
        g.device = k->deviceId;
        break;
      }
      case CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER: {
        auto* u = reinterpret_cast<CUpti_ActivityUnifiedMemoryCounter3*>(rec);
        g.kind = static_cast<uint8_t>(trace::GpuRecordKind::UnifiedMemory);
        g.cupti_copy_kind = static_cast<uint8_t>(u->counterKind);
        g.start_ns = u->start;
        g.end_ns = u->end;
        trace::set_um_address(g, u->address);
        switch (u->counterKind) {
          case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD:
            g.bytes = u->value;
            g.device = u->dstId;
            g.src_kind = static_cast<uint8_t>(u->flags);
            break;
          case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH:
            g.bytes = u->value;
            g.device = u->srcId;
            g.src_kind = static_cast<uint8_t>(u->flags);
            break;
          case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT:
            g.bytes = u->value;  // fault groups
            g.device = u->srcId;
            g.src_kind = static_cast<uint8_t>(u->flags);
            break;
          case CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT:
            g.bytes = 1;  // value is the faulting PC, not a count
            g.end_ns = g.start_ns;
            break;
          default:
            continue;
        }
        break;
      }
      default:
        continue;
    }
    // A forced flush (before a detach, at exit) hands over the records of
    // work still in flight with zero timestamps: no time to report.
    if (g.kind != static_cast<uint8_t>(trace::GpuRecordKind::UnifiedMemory) &&
        (g.start_ns == 0 || g.end_ns < g.start_ns)) {
      incomplete_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    got.push_back(g);
  }
  std::lock_guard<RankedMutex> lock(mutex_);
  pending_.insert(pending_.end(), got.begin(), got.end());
}

void CuptiCollector::take(std::vector<trace::GpuRecord>& out, uint64_t& dropped) {
  std::lock_guard<RankedMutex> lock(mutex_);
  out.insert(out.end(), pending_.begin(), pending_.end());
  pending_.clear();
  dropped += dropped_;
  dropped_ = 0;
}

void CuptiCollector::stop() {
  std::lock_guard<RankedMutex> handover(handover_mutex_);
  if (!active()) return;
  if (!detached()) g_api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  g_hot_line.cupti_active.store(false, std::memory_order_release);
}

}  // namespace cuxfer::shim
