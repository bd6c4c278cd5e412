#include "interpose/cupti_hooks.h"

#include <cupti.h>
#include <dlfcn.h>

#include <cstring>
#include <string>

#include "core/config.h"
#include "core/export.h"
#include "interpose/lookup_hooks.h"
#include "symbols/symbol_table.h"
#include "record/cupti_collector.h"
#include "record/recorder.h"

using namespace cuxfer::shim;

namespace {

std::string module_of(const void* addr) {
  Dl_info info;
  if (!dladdr(addr, &info) || !info.dli_fname || !info.dli_fname[0]) return "the program";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

// Before the app's `call` reaches `real`: let the collector hand CUPTI over.
// The shim's own CUPTI calls never come through here (they use the library
// handle), but a libcupti calling its own export might: that is not the app.
void before_app_takes_cupti(const char* call, const void* real, const void* caller) {
  if (!config().enabled || thread_state().internal > 0) return;
  Dl_info ci, ri;
  if (dladdr(caller, &ci) && dladdr(real, &ri) && ci.dli_fbase == ri.dli_fbase) return;
  if (CuptiCollector::instance().hand_over(call, real))
    Recorder::instance().cupti_handed_over(std::string(call) + " from " + module_of(caller));
}

template <typename Fn>
Fn next_definition(const char* name, Fn self, const void* caller) {
  return reinterpret_cast<Fn>(find_next_definition(caller, name, reinterpret_cast<const void*>(self)));
}

}  // namespace

extern "C" CUXFER_EXPORT CUptiResult cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed) {
  const void* caller = __builtin_return_address(0);
  auto real = next_definition("cuptiActivityRegisterCallbacks", &cuptiActivityRegisterCallbacks, caller);
  if (!real) return CUPTI_ERROR_NOT_INITIALIZED;
  before_app_takes_cupti("cuptiActivityRegisterCallbacks", reinterpret_cast<const void*>(real), caller);
  return real(requested, completed);
}

// An app's own timestamp callback would put the collector's records on the
// app's clock, which the trace cannot know.
extern "C" CUXFER_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(
    CUpti_TimestampCallbackFunc now) {
  const void* caller = __builtin_return_address(0);
  auto real = next_definition("cuptiActivityRegisterTimestampCallback",
                              &cuptiActivityRegisterTimestampCallback, caller);
  if (!real) return CUPTI_ERROR_NOT_INITIALIZED;
  before_app_takes_cupti("cuptiActivityRegisterTimestampCallback", reinterpret_cast<const void*>(real),
                         caller);
  return real(now);
}

// cuptiFinalize ends every activity, the collector's included: its buffers
// are returned first so that nothing recorded so far is lost.
extern "C" CUXFER_EXPORT CUptiResult cuptiFinalize() {
  const void* caller = __builtin_return_address(0);
  auto real = next_definition("cuptiFinalize", &cuptiFinalize, caller);
  if (!real) return CUPTI_ERROR_NOT_INITIALIZED;
  before_app_takes_cupti("cuptiFinalize", reinterpret_cast<const void*>(real), caller);
  return real();
}

namespace cuxfer::shim {

namespace {

void* cupti_hook_named(const char* name) {
  if (std::strncmp(name, "cupti", 5) != 0) return nullptr;
  if (std::strcmp(name, "cuptiActivityRegisterCallbacks") == 0)
    return reinterpret_cast<void*>(&cuptiActivityRegisterCallbacks);
  if (std::strcmp(name, "cuptiActivityRegisterTimestampCallback") == 0)
    return reinterpret_cast<void*>(&cuptiActivityRegisterTimestampCallback);
  if (std::strcmp(name, "cuptiFinalize") == 0) return reinterpret_cast<void*>(&cuptiFinalize);
  return nullptr;
}

}  // namespace

bool cupti_hooks_name(const char* name) { return cupti_hook_named(name) != nullptr; }

void* cupti_hook_for(const char* name, void* fn) {
  void* hook = cupti_hook_named(name);
  if (!hook || fn == hook) return nullptr;
  void* ours = CuptiCollector::instance().own_symbol(name);
  return !ours || ours == fn ? hook : nullptr;
}

}  // namespace cuxfer::shim
