// Process start and end. Nothing CUDA-related happens at load: the trace is
// opened by the first intercepted data call (record/recorder.cpp), so
// preloading into processes that never use CUDA costs almost nothing.
//
// This file is the shim's composition root: the one place that knows both the
// recorder and the rewrite above it, and tells the recorder what the rewrite
// must do at its shutdown and in a fork child.
#include "core/config.h"
#include "core/allocation.h"
#include "interpose/exec_hooks.h"
#include "interpose/exit_hooks.h"
#include "interpose/lookup_hooks.h"
#include "interpose/signal_hooks.h"
#include "record/recorder.h"
#include "rewrite/capture_watch.h"
#include "rewrite/pinned_rewrite.h"

namespace {

void rewrite_before_shutdown() {
  if (cuxfer::shim::config().rewrite_any()) cuxfer::shim::rewrite::on_shutdown();
}

void rewrite_before_fork() { cuxfer::shim::rewrite::before_fork(); }

void rewrite_in_fork_child() {
  cuxfer::shim::rewrite::disable_after_fork();
  cuxfer::shim::rewrite::forget_captures_after_fork();
  cuxfer::shim::rewrite::after_fork_child();
}

__attribute__((constructor)) void cuxfer_load() {
#if defined(CUXFER_DLSYM_ENTRY_ASM)
  cuxfer::shim::mark_dlsym_ready();  // a ThreadSanitizer build's dlsym reaches the hook from here on
#endif
  const bool enabled = cuxfer::shim::config().enabled;
  cuxfer::shim::resolve_exit_hooks(enabled);
  cuxfer::shim::resolve_exec_hooks(enabled);
  cuxfer::shim::resolve_signal_hooks(enabled && cuxfer::shim::config().finish_on_signal);
  if (!enabled) return;
  // Registers the fork handlers before the app can fork. Once recording, the
  // signals that end a process at their default action finish the trace.
  cuxfer::shim::Recorder::instance().set_dependents(
      {&rewrite_before_shutdown, &rewrite_in_fork_child, &cuxfer::shim::hold_end_signals, &rewrite_before_fork});
  // The shim's memory runs out: recording stops, calls pass through (core/allocation.h).
  cuxfer::shim::allocation::set_out_of_memory_handler([] { cuxfer::shim::Recorder::instance().stop_for_memory(); });
}

// Backstop for exits that skip atexit ordering (the normal path is the atexit
// handler registered when recording starts); shutdown() is idempotent.
__attribute__((destructor)) void cuxfer_unload() { cuxfer::shim::Recorder::instance().shutdown(); }

}  // namespace
