// _exit and _Exit: the ends of a process that run no exit handler. Python's
// os._exit, and so the end of every multiprocessing child started by fork,
// comes here; so does a C program's _exit after fork. Without this hook such
// a process's trace lost what its writer had not written yet (up to one
// flush period, its CUPTI records, its notes) and ended without its End
// block. The recorder finishes the trace first (record/recorder.h,
// finish_before_exit: bounded, async-signal-safe on the caller's side), then
// the real function ends the process with the status it was given.
//
// The real functions are looked up when the shim loads, not at the exit: a
// lookup then could wait on the loader's lock held by the thread a signal
// handler interrupted.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include "core/export.h"
#include "interpose/exit_hooks.h"
#include "record/recorder.h"
#include "symbols/symbol_table.h"

namespace {

using ExitFn = void (*)(int);
ExitFn g_real_exit = nullptr;
ExitFn g_real_Exit = nullptr;
// Set by the constructor when the shim records: otherwise (CUXFER_DISABLE, or
// an _exit before the constructor ran) the recorder is not even made here.
bool g_recording = false;

[[noreturn]] void end_process(ExitFn real, const char* name, int status) {
  if (g_recording) cuxfer::shim::Recorder::instance().finish_before_exit(status);
  if (!real) real = cuxfer::shim::next_function<ExitFn>(name);  // ended before the shim's constructor ran
  if (real) real(status);
  // No libc function to forward to (cannot happen with glibc): the system call.
  for (;;) syscall(SYS_exit_group, status);
}

}  // namespace

namespace cuxfer::shim {

void resolve_exit_hooks(bool recording) {
  g_real_exit = next_function<ExitFn>("_exit");
  g_real_Exit = next_function<ExitFn>("_Exit");
  g_recording = recording;
}

}  // namespace cuxfer::shim

extern "C" CUXFER_EXPORT void _exit(int status) { end_process(g_real_exit, "_exit", status); }

extern "C" CUXFER_EXPORT void _Exit(int status) { end_process(g_real_Exit, "_Exit", status); }
