// The interpreter's life and the calling thread's state, read from _PyRuntime
// as the C API reads them, without calling into libpython.
//
// A capture needs four answers before it walks: is the interpreter
// initialised, is it finalising (before and after its life the thread-state
// key is not valid), which thread state is this thread's, and which
// interpreter is the main one. The C API gives them in four calls
// (Py_IsInitialized, _Py_IsFinalizing, PyGILState_GetThisThreadState,
// PyInterpreterState_Main), each a jump into libpython's text: after a
// training step's framework code, cold lines of code and data each. The same
// fields sit in a few lines of _PyRuntime, whose offsets the generated
// layouts state for 3.10-3.14 (layout.h; the debug offsets of 3.13+ leave
// them out, their headers' rows have them); the key's value is read with
// pthread_getspecific, as PyThread_tss_get does. 3.15 keeps the thread's
// state in a C thread-local instead: its row has no key, so the C API.
//
// Never trusted on the layout's word alone: python_stack.cpp reads through
// the C API until one read here agrees with it on a thread that has a state
// (both pointers equal), and through the C API for good if one disagrees.
// Pure over memory: unit-tested with a buffer for _PyRuntime.
#pragma once

#include <pthread.h>

#include <cstdint>

#include "python/layout.h"

namespace cuxfer::shim::python {

struct RuntimeRead {
  bool live = false;     // initialised and not finalising
  uint64_t tstate = 0;   // this thread's state (0: none, or the key not created)
  uint64_t main = 0;     // the main interpreter
};

// Whether `l` states every _PyRuntime field read_runtime() reads.
constexpr bool has_runtime_fields(const PyLayout& l) {
  return l.rt_initialized != kNoField && l.rt_finalizing != kNoField && l.rt_main != kNoField &&
         l.rt_tss_created != kNoField && l.rt_tss_key != kNoField;
}

template <typename T>
inline T load_field(const unsigned char* base, uint32_t offset) noexcept {
  // Relaxed atomic loads: the interpreter's threads write these fields.
  return __atomic_load_n(reinterpret_cast<const T*>(base + offset), __ATOMIC_RELAXED);
}

// What the four C API calls would answer, from _PyRuntime at `runtime`. The
// key is read on each call, never kept: a fork's child recreates it.
inline RuntimeRead read_runtime(const unsigned char* runtime, const PyLayout& l) noexcept {
  RuntimeRead r;
  if (!load_field<int>(runtime, l.rt_initialized) || load_field<uint64_t>(runtime, l.rt_finalizing) != 0) return r;
  r.live = true;
  r.main = load_field<uint64_t>(runtime, l.rt_main);
  // 3.12+: PyGILState_GetThisThreadState asks whether the key was created;
  // before, whether the GIL-state machinery has an interpreter. Both here
  // where the layout states both: stricter, never wrong.
  if (!load_field<int>(runtime, l.rt_tss_created)) return r;
  if (l.rt_auto_interp != kNoField && load_field<uint64_t>(runtime, l.rt_auto_interp) == 0) return r;
  r.tstate = reinterpret_cast<uint64_t>(pthread_getspecific(load_field<pthread_key_t>(runtime, l.rt_tss_key)));
  return r;
}

// Whether a read agrees with what the C API answered on a thread that has a
// state: two pointers equal by chance cannot happen, so one agreement proves
// the offsets.
constexpr bool agrees_with_api(const RuntimeRead& r, uint64_t tstate, uint64_t main) {
  return r.live && tstate != 0 && r.tstate == tstate && r.main == main;
}

}  // namespace cuxfer::shim::python
