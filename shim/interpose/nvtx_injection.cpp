// libcuxfer.so as an NVTX injection library (record/nvtx_ranges.h says why).
//
// NVTX v3 (header-only, compiled into every program and library that uses
// it, PyTorch's torch.cuda.nvtx included) loads the library named by
// NVTX_INJECTION64_PATH at its first call and calls its
// InitializeInjectionNvtx2 with a function that hands out NVTX's tables of
// function pointers; the library writes its own functions into the slots it
// implements. `cuxfer record` sets the variable to the preloaded shim, so the
// dlopen finds the library already loaded.
//
// Implemented: thread ranges (nvtxRangePush{A,W,Ex}, nvtxRangePop and their
// nvtxDomain* forms), domains and registered strings. Start/end ranges
// (nvtxRangeStart/End) belong to no thread's stack and marks have no extent:
// they are not recorded. When another NVTX tool was named before us
// (CUXFER_NVTX_NEXT: `cuxfer record` moves an NVTX_INJECTION64_PATH it finds
// there), it is initialized first and every call goes on to it, with its
// own domain and string handles.
#include <dlfcn.h>
// The types only: NVTX's own implementation (its loader and globals) is the
// app's, not ours.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/config.h"
#include "core/export.h"
#include "core/log.h"
#include "record/nvtx_ranges.h"
#include "record/recorder.h"

using namespace cuxfer::shim;

namespace {

// The next tool's functions, where one was chained (null otherwise).
struct Next {
  nvtxRangePushEx_impl_fntype push_ex = nullptr;
  nvtxRangePushA_impl_fntype push_a = nullptr;
  nvtxRangePushW_impl_fntype push_w = nullptr;
  nvtxRangePop_impl_fntype pop = nullptr;
  nvtxDomainRangePushEx_impl_fntype domain_push_ex = nullptr;
  nvtxDomainRangePop_impl_fntype domain_pop = nullptr;
  nvtxDomainCreateA_impl_fntype domain_create_a = nullptr;
  nvtxDomainCreateW_impl_fntype domain_create_w = nullptr;
  nvtxDomainRegisterStringA_impl_fntype register_a = nullptr;
  nvtxDomainRegisterStringW_impl_fntype register_w = nullptr;
};
Next g_next;

// Handles the app holds (the next tool's, or ours when there is none) ->
// the shim's ids. Few domains, possibly many registered strings: fixed
// open-addressed tables, lock-free to read; a full table leaves the handle
// unnamed (its ranges are recorded under "?").
template <size_t N>
class HandleMap {
 public:
  void put(const void* handle, uint32_t id) {
    const auto key = reinterpret_cast<uintptr_t>(handle);
    if (key == 0) return;
    for (size_t i = 0, s = slot(key); i < N; ++i, s = (s + 1) % N) {
      uintptr_t expected = 0;
      if (keys_[s].compare_exchange_strong(expected, key, std::memory_order_acq_rel) || expected == key) {
        ids_[s].store(id, std::memory_order_release);
        return;
      }
    }
  }
  uint32_t get(const void* handle) const {
    const auto key = reinterpret_cast<uintptr_t>(handle);
    if (key == 0) return 0;
    for (size_t i = 0, s = slot(key); i < N; ++i, s = (s + 1) % N) {
      const uintptr_t k = keys_[s].load(std::memory_order_acquire);
      if (k == key) return ids_[s].load(std::memory_order_acquire);
      if (k == 0) return 0;
    }
    return 0;
  }

 private:
  static size_t slot(uintptr_t key) { return (key >> 4) * 0x9E3779B97F4A7C15ull % N; }
  std::atomic<uintptr_t> keys_[N] = {};
  std::atomic<uint32_t> ids_[N] = {};
};
CUXFER_LARGE_BSS HandleMap<256> g_domains;
CUXFER_LARGE_BSS HandleMap<8192> g_strings;
std::atomic<uintptr_t> g_own_handles{0};  // our handles when no tool is chained: small fake addresses

const void* own_handle() { return reinterpret_cast<const void*>((g_own_handles.fetch_add(1) + 1) << 4); }

// Wide strings as UTF-8 (NVTX's W variants take wchar_t: UTF-32 on Linux).
std::string utf8_of(const wchar_t* w) {
  std::string out;
  if (!w) return out;
  for (; *w; ++w) {
    auto c = static_cast<uint32_t>(*w);
    if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

// A wide message's name: interned by its UTF-8 bytes (the per-thread name
// cache keys on the message's address, which a converted copy does not keep).
uint32_t wide_name(uint32_t domain, const wchar_t* message) {
  const std::string s = utf8_of(message);
  return NvtxRanges::instance().name(domain, s.c_str(), s.size());
}

uint32_t ascii_name(uint32_t domain, const char* message) {
  return NvtxRanges::instance().name(domain, message, message ? std::strlen(message) : 0);
}

// The name an event's attributes give, in `domain`.
uint32_t name_of(uint32_t domain, const nvtxEventAttributes_t* a) {
  constexpr size_t kNeeded = offsetof(nvtxEventAttributes_t, message) + sizeof(nvtxMessageValue_t);
  if (!a || a->size < kNeeded) return ascii_name(domain, "?");
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return ascii_name(domain, a->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE: return wide_name(domain, a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      const uint32_t id = g_strings.get(a->message.registered);
      return id ? id : ascii_name(domain, "?");
    }
    default: return ascii_name(domain, "");
  }
}

bool recording_ranges() { return config().enabled && config().nvtx; }

int NVTX_API range_push_a(const char* message) {
  const int next = g_next.push_a ? g_next.push_a(message) : 0;
  if (!recording_ranges()) return next;
  const int depth = NvtxRanges::instance().push(thread_state(), ascii_name(0, message));
  return g_next.push_a ? next : depth;
}

int NVTX_API range_push_w(const wchar_t* message) {
  const int next = g_next.push_w ? g_next.push_w(message) : 0;
  if (!recording_ranges()) return next;
  const int depth = NvtxRanges::instance().push(thread_state(), wide_name(0, message));
  return g_next.push_w ? next : depth;
}

int NVTX_API range_push_ex(const nvtxEventAttributes_t* attributes) {
  const int next = g_next.push_ex ? g_next.push_ex(attributes) : 0;
  if (!recording_ranges()) return next;
  const int depth = NvtxRanges::instance().push(thread_state(), name_of(0, attributes));
  return g_next.push_ex ? next : depth;
}

int NVTX_API range_pop() {
  const int next = g_next.pop ? g_next.pop() : 0;
  if (!recording_ranges()) return next;
  const int depth = NvtxRanges::instance().pop(thread_state());
  return g_next.pop ? next : depth;
}

int NVTX_API domain_range_push_ex(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  const int next = g_next.domain_push_ex ? g_next.domain_push_ex(domain, attributes) : 0;
  if (!recording_ranges()) return next;
  const int depth = NvtxRanges::instance().push(thread_state(), name_of(g_domains.get(domain), attributes));
  return g_next.domain_push_ex ? next : depth;
}

int NVTX_API domain_range_pop(nvtxDomainHandle_t domain) {
  const int next = g_next.domain_pop ? g_next.domain_pop(domain) : 0;
  if (!recording_ranges()) return next;
  const int depth = NvtxRanges::instance().pop(thread_state());
  return g_next.domain_pop ? next : depth;
}

nvtxDomainHandle_t NVTX_API domain_create_a(const char* name) {
  const void* h = g_next.domain_create_a ? g_next.domain_create_a(name) : own_handle();
  g_domains.put(h, NvtxRanges::instance().domain(name));
  return static_cast<nvtxDomainHandle_t>(const_cast<void*>(h));
}

nvtxDomainHandle_t NVTX_API domain_create_w(const wchar_t* name) {
  const void* h = g_next.domain_create_w ? g_next.domain_create_w(name) : own_handle();
  g_domains.put(h, NvtxRanges::instance().domain(utf8_of(name).c_str()));
  return static_cast<nvtxDomainHandle_t>(const_cast<void*>(h));
}

nvtxStringHandle_t NVTX_API register_string_a(nvtxDomainHandle_t domain, const char* s) {
  const void* h = g_next.register_a ? g_next.register_a(domain, s) : own_handle();
  g_strings.put(h, ascii_name(g_domains.get(domain), s));
  return static_cast<nvtxStringHandle_t>(const_cast<void*>(h));
}

nvtxStringHandle_t NVTX_API register_string_w(nvtxDomainHandle_t domain, const wchar_t* s) {
  const void* h = g_next.register_w ? g_next.register_w(domain, s) : own_handle();
  g_strings.put(h, wide_name(g_domains.get(domain), s));
  return static_cast<nvtxStringHandle_t>(const_cast<void*>(h));
}

// A module's table and what its slots held before a chained tool was
// initialized: NVTX's own stubs (which call back into the slot: never to be
// called from our functions).
struct Table {
  NvtxFunctionTable slots = nullptr;
  unsigned size = 0;
  NvtxFunctionPointer before[32] = {};
  void take(const NvtxExportTableCallbacks& callbacks, NvtxCallbackModule module) {
    if (!callbacks.GetModuleFunctionTable(module, &slots, &size) || !slots) {
      slots = nullptr;
      size = 0;
    }
    for (unsigned i = 0; i < size && i < 32; ++i) before[i] = slots[i] ? *slots[i] : nullptr;
  }
  // Writes `ours` into slot `id`, keeping in `next` what a chained tool put
  // there (a pointer that is not what NVTX had before it ran).
  template <typename Fn>
  void install(unsigned id, Fn ours, Fn& next) {
    if (!slots || id >= size || id >= 32 || !slots[id]) return;
    if (*slots[id] && *slots[id] != before[id]) next = reinterpret_cast<Fn>(*slots[id]);
    *slots[id] = reinterpret_cast<NvtxFunctionPointer>(ours);
  }
};

// Loads and initializes the tool named by CUXFER_NVTX_NEXT; false when there
// is none or it failed (said once).
bool initialize_next(NvtxGetExportTableFunc_t get_export_table) {
  const char* path = config().nvtx_next.c_str();
  if (!*path) return false;
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  auto init = lib ? reinterpret_cast<int (*)(NvtxGetExportTableFunc_t)>(dlsym(lib, "InitializeInjectionNvtx2")) : nullptr;
  if (!init || !init(get_export_table)) {
    log::warn(std::string("nvtx: the NVTX tool in CUXFER_NVTX_NEXT (") + path +
              ") did not load or initialize; NVTX calls reach cuxfer only");
    return false;
  }
  return true;
}

}  // namespace

// NVTX's entry point for an injection library. Returns 1 when the tables were
// filled. Never fails the app: anything missing leaves NVTX as it was.
extern "C" CUXFER_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  if (!get_export_table) return 0;
  auto callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) || !callbacks->GetModuleFunctionTable)
    return 0;
  Table core, core2;
  core.take(*callbacks, NVTX_CB_MODULE_CORE);
  core2.take(*callbacks, NVTX_CB_MODULE_CORE2);
  initialize_next(get_export_table);
  core.install(NVTX_CBID_CORE_RangePushA, &range_push_a, g_next.push_a);
  core.install(NVTX_CBID_CORE_RangePushW, &range_push_w, g_next.push_w);
  core.install(NVTX_CBID_CORE_RangePushEx, &range_push_ex, g_next.push_ex);
  core.install(NVTX_CBID_CORE_RangePop, &range_pop, g_next.pop);
  core2.install(NVTX_CBID_CORE2_DomainRangePushEx, &domain_range_push_ex, g_next.domain_push_ex);
  core2.install(NVTX_CBID_CORE2_DomainRangePop, &domain_range_pop, g_next.domain_pop);
  core2.install(NVTX_CBID_CORE2_DomainCreateA, &domain_create_a, g_next.domain_create_a);
  core2.install(NVTX_CBID_CORE2_DomainCreateW, &domain_create_w, g_next.domain_create_w);
  core2.install(NVTX_CBID_CORE2_DomainRegisterStringA, &register_string_a, g_next.register_a);
  core2.install(NVTX_CBID_CORE2_DomainRegisterStringW, &register_string_w, g_next.register_w);
  return 1;
}
