// The calling thread's Python stack, read by the thread itself without the
// GIL and without a profile hook (most copies are made with the GIL released:
// PyTorch's Tensor.to, ctypes calls; and torch.profiler's own hook would not
// compose with ours).
//
// The interpreter is found lazily (the shim loads before it starts), in a
// shared libpython or in the executable (its symbols exported, or else named
// by the program's symbol table: python/program_symbols.h): its version from Py_Version (or
// Py_GetVersion before 3.11), its layout from python/layout.h. The thread's
// state is what PyGILState_GetThisThreadState gives (a thread-local read, no
// lock), read from _PyRuntime once that agreed with the call
// (python/runtime_state.h); its frames are stable while the thread is in our hook,
// and every code object they hold is alive. The first walks read memory
// through process_vm_readv, so that a layout that does not match faults
// nowhere: a failed read or a code object of the wrong type turns Python
// stacks off with one note. Once those walks passed, frames are read directly.
//
// Each code object is copied once, on first sight (file name, qualified name,
// first line, line table) and sent to the trace as a PyCode; lines are
// decoded offline by the analyzer. Never a guess: an unknown version, a debug
// build, a free-threaded build or a failed check means no Python frames, said
// once in the trace's notes.
#pragma once

#include <link.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/publish_order.h"
#include "core/ranked_lock.h"
#include "python/layout.h"
#include "python/program_symbols.h"
#include "trace/records.h"

namespace cuxfer::shim::python {

// Code objects seen in stacks, interned into ids (>= 1). Lock-free like the
// call-site table: a new code object claims a slot with one CAS.
class CodeTable {
 public:
  static constexpr uint32_t kCapacity = 16384;

  // What identifies a code object beyond its address (which a freed one's
  // successor may reuse): the objects it points to and its first line.
  struct Key {
    uint64_t code = 0, filename = 0, qualname = 0, line_table = 0;
    int32_t first_line = 0;
    bool operator==(const Key& o) const {
      return code == o.code && filename == o.filename && qualname == o.qualname && line_table == o.line_table &&
             first_line == o.first_line;
    }
  };
  // The id of `key`, or 0 when the table is full or `fill` failed. `fill`
  // copies the code object's contents; it is called at most once per new key.
  using Fill = bool (*)(void* ctx, trace::PyCode& out);
  uint32_t intern(const Key& key, Fill fill, void* ctx) noexcept;
  // The id of `key` if it sits in its first probe slot, copied; else 0 (then
  // intern() decides). Lock-free, no stores: the walk's hit path.
  uint32_t find_fast(const Key& key) const noexcept {
    if (!entries_) return 0;
    const uint32_t i = slot_of(key.code);
    const Entry& e = entries_[i];
    return e.state.load(std::memory_order_acquire) == 2 && e.key == key ? i + 1 : 0;
  }
  // The slot find_fast() would read first for `code` (a prefetch hint).
  uint64_t slot_address(uint64_t code) const noexcept {
    return entries_ ? reinterpret_cast<uint64_t>(&entries_[slot_of(code)]) : 0;
  }
  void collect_new(std::vector<trace::PyCode>& out);
  void mark_all_unwritten();
  // The code object of id, once copied; null otherwise. Never blocks.
  const trace::PyCode* find(uint32_t id) const noexcept;
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  CodeTable();
  ~CodeTable();
  CodeTable(const CodeTable&) = delete;
  CodeTable& operator=(const CodeTable&) = delete;

 private:
  static uint32_t slot_of(uint64_t code) noexcept {
    uint64_t x = code >> 4;  // by address alone: a reused address lands in the same chain
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<uint32_t>(x & (kCapacity - 1));
  }
  struct Entry {
    std::atomic<uint32_t> state;  // 0 empty, 1 being filled, 2 ready, 3 fill failed
    Key key;
    trace::PyCode* code;
  };
  Entry* entries_;
  PublishOrder ready_{kCapacity};  // ids in the order their code objects were copied
  std::atomic<uint64_t> dropped_{0};
};

enum class ReadMode : uint8_t { Checked, Direct };

// Whether a copy should search the process for an interpreter now (its
// retry interval has passed). The search (dlsym(RTLD_DEFAULT) of
// Py_IsInitialized) walks every loaded object's symbol table: 10-30 us on a
// copy that follows a memset of a large buffer, which a C++ program paid
// every 200 ms for as long as it ran. Without an interpreter symbol nothing
// can change until the loader maps or unmaps an object, so the search waits
// for the loader's generation (symbols/elf_lookup.h) to move; once the symbol
// was seen (the interpreter not yet initialised), every retry searches.
// generation == 0: the loader does not count, search.
constexpr bool search_for_interpreter(bool symbol_seen, uint64_t generation, uint64_t generation_at_last_search) {
  return symbol_seen || generation == 0 || generation != generation_at_last_search;
}

// Copies the calling thread has still to make before capture() looks at the
// interpreter again, while none is ready to be read (python_stack.cpp).
extern thread_local uint32_t t_calls_to_gate __attribute__((tls_model("initial-exec")));

class PythonStacks {
 public:
  static PythonStacks& instance();

  // Writes the calling thread's Python frames, innermost first, encoded as in
  // trace/python_frame.h, to out[0, max); returns how many. 0 when the thread
  // runs no Python, the interpreter is not (yet) known, or stacks are off.
  // Never throws, never blocks.
  uint32_t capture(uint64_t* out, uint32_t max) noexcept;
  // The same, for the copy hooks: a thread that found no interpreter to read
  // passes the next kGateCalls - 1 copies here with a decrement of its own,
  // without touching the shared state (a cache line, often a page, cold after
  // the driver's call).
  static uint32_t capture_gated(uint64_t* out, uint32_t max) noexcept {
    if (t_calls_to_gate != 0) {
      --t_calls_to_gate;
      return 0;
    }
    return instance().capture(out, max);
  }

  // Writer thread: code objects not yet in the trace, and one note each time
  // the state is decided (which interpreter, or why no Python frames).
  void collect_new(std::vector<trace::PyCode>& out) { codes_.collect_new(out); }
  bool take_note(std::string& note);
  void mark_all_unwritten() { codes_.mark_all_unwritten(); }  // fork child: a new trace
  // Writer thread, as the recording starts: reads the program's own symbol
  // table for an interpreter it hides (python/program_symbols.h), a file
  // read kept off the app's threads; a search that comes first reads it
  // itself, one that comes while it is read waits for it.
  void read_program() noexcept;

  // dlclose hook: before an object is unloaded, an interpreter still awaited
  // is searched for again rather than called into.
  void before_dlclose() noexcept;
  // After it: an interpreter being read whose code is no longer mapped turns
  // Python frames off, with a note.
  void after_dlclose() noexcept;

  // Names a Python frame value captured by capture() (for policy entries):
  // its code object's file and qualified name, and the line it is at. The
  // views live as long as the process. False for a code object not copied.
  bool name_frame(uint64_t frame, std::string_view& file, std::string_view& function, int& line) const noexcept;

  // For tests: how many walks are read through process_vm_readv first.
  static constexpr uint32_t kCheckedWalks = 32;

  // The walk of one thread's frames once its state is known (capture()'s
  // second half): the state's interpreter must be `main` (else a note, no
  // frames); the first kCheckedWalks walks read through process_vm_readv and
  // a frame that does not read as the layout says turns Python frames off
  // with a note, never followed.
  uint32_t walk_thread(uint64_t tstate, uint64_t main, uint64_t* out, uint32_t max) noexcept;

  // For tests: an interpreter as resolve() would have found it (its layout,
  // and the addresses of the objects the walk compares with), ready to walk
  // memory the test lays out. Not the instance capture() uses.
  struct KnownObjects {
    uint64_t code_type = 0, unicode_type = 0, bytes_type = 0, none_object = 0;
    int (*is_finalizing)() = nullptr;  // the interpreter's Py_IsFinalizing, when the test has one
  };
  PythonStacks(const PyLayout& layout, const KnownObjects& objects);
  PythonStacks() = default;

 private:
  // kAwaiting: an interpreter's Py_IsInitialized was found, and said no.
  enum State : int { kUnresolved, kResolving, kAwaiting, kReady, kOff };
  struct Api {
    int (*is_initialized)() = nullptr;
    int (*is_finalizing)() = nullptr;
    void* (*this_thread_state)() = nullptr;
    void* (*main_interpreter)() = nullptr;
    uint64_t code_type = 0, unicode_type = 0, bytes_type = 0;
    uint64_t none_object = 0;  // Py_None; 0 (matches no frame's code) if not exported
  };

  // How capture() reads the interpreter's life and the thread's state
  // (python/runtime_state.h): through the C API until a read of _PyRuntime
  // agreed with it, then from _PyRuntime; through the C API for good when
  // the layout states no such fields or a read disagreed.
  enum RuntimeReads : int { kApiUntilChecked, kFromRuntime, kApiOnly };

  // The four answers, either way; false while the interpreter is not live.
  bool thread_state(uint64_t& tstate, uint64_t& main) noexcept;
  void check_runtime_read(uint64_t tstate, uint64_t main) noexcept;
  void resolve(uint64_t now) noexcept;
  void resolve_interpreter();
  ProgramPython program_python() noexcept;
  void* interpreter_symbol(const char* name) const noexcept;
  std::string symbols_note()
      const;  // for the "Python frames in call stacks" note: where the symbols came from
  void turn_off(const std::string& why) noexcept;
  // Says once that copies from a subinterpreter's threads carry no Python frames.
  void note_subinterpreter() noexcept;
  template <ReadMode M>
  uint32_t walk(uint64_t tstate, uint64_t* out, uint32_t max, bool& failed) noexcept;
  template <ReadMode M, FrameModel Model>
  uint32_t walk_frames(uint64_t tstate, uint64_t* out, uint32_t max, bool& failed) noexcept;
  // _PyRuntime's finalizing is set (or Py_IsFinalizing says so): the
  // interpreter may be freeing daemon threads' frames now.
  bool finalization_began() const noexcept;
  template <ReadMode M>
  uint32_t intern_code(const PyLayout& l, uint64_t code) noexcept;

  std::atomic<int> state_{kUnresolved};
  std::atomic<uint64_t> next_try_ns_{0};
  // capture()'s own gate before resolve(), in time-stamp counter ticks: a
  // process without an interpreter comes to it on every copy.
  std::atomic<uint64_t> next_try_tsc_{0};
  // Read and written only by the thread that holds state_ at kResolving.
  bool symbol_seen_ = false;                 // Py_IsInitialized was found (not yet initialised)
  // Where resolve_interpreter() reads the interpreter's symbols from.
  enum class SymbolSource : uint8_t { kGlobalScope, kLocalObject, kProgramTable };
  SymbolSource symbols_from_ = SymbolSource::kGlobalScope;
  const link_map* symbols_object_ = nullptr;  // kLocalObject: the object that defines them
  std::atomic<int (*)()> awaited_{nullptr};  // its Py_IsInitialized, in kAwaiting
  // The program's own symbols (program_symbols.h): read once, by whichever of
  // read_program() (the writer thread) and a search gets there first.
  enum ProgramState : int { kProgramUnread, kProgramReading, kProgramRead };
  std::atomic<int> program_state_{kProgramUnread};
  ProgramSymbols program_;
  ProgramPython program_result_ = ProgramPython::kNone;  // set before program_state_ says kProgramRead
  uint64_t generation_at_search_ = 0;  // loader_generation() at the last search
  std::atomic<uint32_t> checked_walks_{0};
  Api api_;
  PyLayout layout_{};
  const unsigned char* runtime_ = nullptr;  // _PyRuntime
  std::atomic<int> runtime_reads_{kApiOnly};
  std::atomic<bool> subinterpreter_noted_{false};
  CodeTable codes_;
  RankedMutex note_mutex_{LockRank::kPythonNotes};  // held only to hand one string over
  std::vector<std::string> notes_;
};

}  // namespace cuxfer::shim::python
