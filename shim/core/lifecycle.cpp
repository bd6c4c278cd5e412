// Process start and end. Nothing CUDA-related happens at load: the trace is
// opened by the first intercepted data call (record/recorder.cpp), so
// preloading into processes that never use CUDA costs almost nothing.
#include "core/config.h"
#include "record/recorder.h"

namespace {

__attribute__((constructor)) void cuxfer_load() {
  if (!cuxfer::shim::config().enabled) return;
  cuxfer::shim::Recorder::instance();  // registers the fork handlers before the app can fork
}

// Backstop for exits that skip atexit ordering (the normal path is the atexit
// handler registered when recording starts); shutdown() is idempotent.
__attribute__((destructor)) void cuxfer_unload() { cuxfer::shim::Recorder::instance().shutdown(); }

}  // namespace
