// Process start and end. Nothing CUDA-related happens at load: the trace is
// opened by the first intercepted data call (record/recorder.cpp), so
// preloading into processes that never use CUDA costs almost nothing.
#include "core/config.h"
#include "memory/host_ranges.h"
#include "record/recorder.h"

namespace {

__attribute__((constructor)) void cuxfer_load() {
  const cuxfer::shim::Config& c = cuxfer::shim::config();
  if (!c.enabled) return;
  // The libc hooks start recording host allocations only now, and only when
  // the rewrite may register them: before, they just forward.
  if (c.rewrite_pin && c.register_in_place) cuxfer::shim::enable_host_tracking(c.register_min);
  cuxfer::shim::Recorder::instance();  // registers the fork handlers before the app can fork
}

// Backstop for exits that skip atexit ordering (the normal path is the atexit
// handler registered when recording starts); shutdown() is idempotent.
__attribute__((destructor)) void cuxfer_unload() { cuxfer::shim::Recorder::instance().shutdown(); }

}  // namespace
