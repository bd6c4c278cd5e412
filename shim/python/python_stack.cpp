#include "python/python_stack.h"
#include "core/export.h"

#include <dlfcn.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <x86intrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/clock.h"
#include "core/config.h"
#include "core/prefetch_trail.h"
#include "python/program_symbols.h"
#include "python/runtime_state.h"
#include "symbols/elf_lookup.h"
#include "symbols/symbol_table.h"
#include "trace/python_frame.h"
#include "trace/python_lines.h"

namespace cuxfer::shim::python {

namespace {

constexpr uint64_t kRetryNs = 200'000'000;  // look for an interpreter again at most every 200 ms
// The same gate in time-stamp counter ticks (0.1-0.4 s at the usual 1-4 GHz):
// read with rdtsc (a few ns), where the clock costs a C++ program's every copy
// 20-40 ns in a VM. Only a gate: resolve() keeps its own in nanoseconds.
constexpr uint64_t kRetryTicks = 400'000'000;
constexpr uint32_t kGateCalls = 64;
constexpr int64_t kMaxStringChars = 4096;
constexpr int64_t kMaxLineTableBytes = 1 << 20;

// --- reading the interpreter's memory ------------------------------------------------

template <ReadMode M>
CUXFER_HOT bool read_bytes(uint64_t addr, void* dst, size_t n) noexcept {
  if constexpr (M == ReadMode::Direct) {
    // Only addresses the checked walks proved readable get here (a frame,
    // its code object, the thread state): no test on the hot path.
    std::memcpy(dst, reinterpret_cast<const void*>(addr), n);
    return true;
  } else {
    if (addr == 0) return false;
    // A bad address fails the call instead of faulting.
    iovec local{dst, n}, remote{reinterpret_cast<void*>(addr), n};
    return syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0) == static_cast<long>(n);
  }
}

template <ReadMode M, typename T>
bool get(uint64_t addr, T& v) noexcept {
  return read_bytes<M>(addr, &v, sizeof v);
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    s.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// A str object's text as UTF-8: compact strings only (every code object's
// names are), 1, 2 or 4 bytes per character.
template <ReadMode M>
bool read_unicode(const PyLayout& l, uint64_t unicode_type, uint64_t obj, std::string& out) {
  uint64_t type = 0;
  uint32_t state = 0;
  int64_t length = 0;
  if (obj == 0 || !get<M>(obj + l.object_type, type) || type != unicode_type || !get<M>(obj + l.str_state, state) ||
      !get<M>(obj + l.str_length, length))
    return false;
  const uint32_t kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
  if (!compact || length < 0 || length > kMaxStringChars || (kind != 1 && kind != 2 && kind != 4)) return false;
  const uint64_t data = obj + (ascii ? l.str_ascii_size : l.str_compact_size);
  std::string raw(static_cast<size_t>(length) * kind, '\0');
  if (length && !read_bytes<M>(data, raw.data(), raw.size())) return false;
  out.clear();
  if (kind == 1 && ascii) {
    out = std::move(raw);
    return true;
  }
  out.reserve(raw.size());
  for (int64_t i = 0; i < length; ++i) {
    uint32_t cp = 0;
    if (kind == 1) cp = static_cast<unsigned char>(raw[i]);
    else if (kind == 2) cp = static_cast<uint32_t>(static_cast<unsigned char>(raw[2 * i])) |
                            static_cast<uint32_t>(static_cast<unsigned char>(raw[2 * i + 1])) << 8;
    else std::memcpy(&cp, raw.data() + 4 * i, 4);
    append_utf8(out, cp > 0x10ffff ? 0xfffd : cp);
  }
  return true;
}

template <ReadMode M>
bool read_pybytes(const PyLayout& l, uint64_t bytes_type, uint64_t obj, std::string& out) {
  uint64_t type = 0;
  int64_t size = 0;
  if (obj == 0 || !get<M>(obj + l.object_type, type) || type != bytes_type || !get<M>(obj + l.bytes_size, size) || size < 0)
    return false;
  if (size > kMaxLineTableBytes) {  // kept out: lines of this code are unknown, not wrong
    out.clear();
    return true;
  }
  out.assign(static_cast<size_t>(size), '\0');
  return size == 0 || read_bytes<M>(obj + l.bytes_data, out.data(), out.size());
}

uint32_t parse_version_string(const char* v) {
  int major = 0, minor = 0;
  if (!v || std::sscanf(v, "%d.%d", &major, &minor) != 2 || major < 0 || major > 255 || minor < 0 || minor > 255)
    return 0;
  return static_cast<uint32_t>(major << 8 | minor);
}

std::string version_text(uint32_t v) { return std::to_string(v >> 8) + "." + std::to_string(v & 0xff); }

}  // namespace

// --- code table ----------------------------------------------------------------------

CodeTable::CodeTable()
    // Zeroed pages from the kernel: touched only as code objects are met.
    : entries_(static_cast<Entry*>(std::calloc(kCapacity, sizeof(Entry)))) {}

CodeTable::~CodeTable() {
  if (!entries_) return;
  for (uint32_t i = 0; i < kCapacity; ++i)
    if (entries_[i].state.load(std::memory_order_acquire) == 2) delete entries_[i].code;
  std::free(entries_);
}

CUXFER_HOT uint32_t CodeTable::intern(const Key& key, Fill fill, void* ctx) noexcept {
  if (!entries_) return 0;
  // A reused address (another code object) lands in the same chain and is
  // told apart by the rest of the key.
  const uint64_t h = slot_of(key.code);
  for (uint32_t probe = 0; probe < kCapacity; ++probe) {
    const uint32_t i = static_cast<uint32_t>((h + probe) & (kCapacity - 1));
    Entry& e = entries_[i];
    uint32_t st = e.state.load(std::memory_order_acquire);
    if (st == 0 && e.state.compare_exchange_strong(st, 1, std::memory_order_acq_rel)) {
      e.key = key;
      trace::PyCode* c = new (std::nothrow) trace::PyCode;
      bool ok = c != nullptr;
      if (ok) {
        ok = fill(ctx, *c);
      }
      if (!ok) {
        delete c;
        e.state.store(3, std::memory_order_release);
        return 0;
      }
      c->id = i + 1;
      e.code = c;
      e.state.store(2, std::memory_order_release);
      ready_.publish(i + 1);
      return i + 1;
    }
    // st is what the slot holds now: ready or failed entries can be compared.
    if ((st == 2 || st == 3) && e.key == key) return st == 2 ? i + 1 : 0;
  }
  dropped_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

const trace::PyCode* CodeTable::find(uint32_t id) const noexcept {
  if (!entries_ || id == 0 || id > kCapacity) return nullptr;
  const Entry& e = entries_[id - 1];
  return e.state.load(std::memory_order_acquire) == 2 ? e.code : nullptr;
}

void CodeTable::collect_new(std::vector<trace::PyCode>& out) {
  if (!entries_) return;
  ready_.drain([&](uint32_t id) { out.push_back(*entries_[id - 1].code); });
}

void CodeTable::mark_all_unwritten() { ready_.rewind(); }

// --- the interpreter -----------------------------------------------------------------

PythonStacks::PythonStacks(const PyLayout& layout, const KnownObjects& objects) {
  layout_ = layout;
  api_.code_type = objects.code_type;
  api_.unicode_type = objects.unicode_type;
  api_.bytes_type = objects.bytes_type;
  api_.none_object = objects.none_object;
  api_.is_finalizing = objects.is_finalizing;
  state_.store(kReady, std::memory_order_release);
}

thread_local uint32_t t_calls_to_gate __attribute__((tls_model("initial-exec"))) = 0;

CUXFER_HOT PythonStacks& PythonStacks::instance() {
  static PythonStacks* s = new PythonStacks;  // never destroyed: copies may come from atexit handlers
  return *s;
}

bool PythonStacks::name_frame(uint64_t frame, std::string_view& file, std::string_view& function,
                              int& line) const noexcept {
  if (!trace::is_python_frame(frame)) return false;
  const trace::PythonFrame p = trace::decode_python_frame(frame);
  const trace::PyCode* c = codes_.find(p.code_id);
  if (!c) return false;
  file = c->filename;
  function = c->qualname;
  line = trace::python_line(c->version, c->first_line, c->line_table, p.offset);
  return true;
}

bool PythonStacks::take_note(std::string& note) {
  std::lock_guard<RankedMutex> lock(note_mutex_);
  if (notes_.empty()) return false;
  note = std::move(notes_.front());
  notes_.erase(notes_.begin());
  return true;
}

void PythonStacks::turn_off(const std::string& why) noexcept {
  state_.store(kOff, std::memory_order_release);
  std::lock_guard<RankedMutex> lock(note_mutex_);
  notes_.push_back("no Python frames in call stacks: " + why);
}

std::string PythonStacks::symbols_note() const {
  switch (symbols_from_) {
    case SymbolSource::kGlobalScope:
      return {};
    case SymbolSource::kLocalObject:
      return std::string("; its symbols from ") +
             (symbols_object_->l_name && *symbols_object_->l_name ? symbols_object_->l_name : "the program") +
             ", loaded outside the global scope (dlopen's RTLD_LOCAL)";
    case SymbolSource::kProgramTable:
      return "; its symbols from the program's symbol table, as the program exports none";
  }
  return {};
}

ProgramPython PythonStacks::program_python() noexcept {
  int expected = kProgramUnread;
  if (program_state_.compare_exchange_strong(expected, kProgramReading, std::memory_order_acq_rel)) {
    program_result_ = program_.read();
    program_state_.store(kProgramRead, std::memory_order_release);
    return program_result_;
  }
  // The writer thread is reading it (a file read it began as the recording
  // started, long before a real program's first copy): wait for its answer,
  // at most 2 s, after which this search goes on without it.
  const uint64_t give_up = now_ns() + 2'000'000'000ull;
  while (program_state_.load(std::memory_order_acquire) != kProgramRead) {
    if (now_ns() > give_up) return ProgramPython::kNone;
    sched_yield();
  }
  return program_result_;
}

void PythonStacks::read_program() noexcept {
  if (config().python_stacks) program_python();
}

void PythonStacks::before_dlclose() noexcept {
  // The library whose Py_IsInitialized capture() asks may be the one going:
  // search again (a later copy finds what is left) instead of calling into it.
  int expected = kAwaiting;
  state_.compare_exchange_strong(expected, kUnresolved, std::memory_order_acq_rel);
}

void PythonStacks::after_dlclose() noexcept {
  // An interpreter being read whose library is gone (finalized, then
  // unloaded): nothing of it may be read again.
  if (state_.load(std::memory_order_acquire) != kReady) return;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(api_.is_initialized), &info) != 0) return;
  turn_off("the interpreter's library was unloaded (dlclose)");
}

void PythonStacks::note_subinterpreter() noexcept {
  // Only the main interpreter's threads are walked: what proved the layout
  // (the checked walks, the state read agreeing with the C API) was proved
  // on them. The copies themselves are recorded as any.
  if (subinterpreter_noted_.load(std::memory_order_relaxed) || subinterpreter_noted_.exchange(true)) return;
  std::lock_guard<RankedMutex> lock(note_mutex_);
  notes_.push_back("Python frames: copies made on a subinterpreter's thread (concurrent.interpreters, "
                   "_interpreters) carry native frames only");
}

CUXFER_HOT void PythonStacks::resolve(uint64_t now) noexcept {
  if (now < next_try_ns_.load(std::memory_order_relaxed)) return;
  int expected = kUnresolved;
  if (!state_.compare_exchange_strong(expected, kResolving, std::memory_order_acq_rel)) return;
  next_try_ns_.store(now + kRetryNs, std::memory_order_relaxed);
  const uint64_t generation = loader_generation();
  if (!search_for_interpreter(symbol_seen_, generation, generation_at_search_)) {
    state_.store(kUnresolved, std::memory_order_release);
    return;
  }
  generation_at_search_ = generation;
  resolve_interpreter();
}

void* PythonStacks::interpreter_symbol(const char* name) const noexcept {
  switch (symbols_from_) {
    case SymbolSource::kGlobalScope:
      return real_dlsym(RTLD_DEFAULT, name);
    case SymbolSource::kLocalObject:
      return elf_lookup_in(symbols_object_, name);
    case SymbolSource::kProgramTable:
      return program_.find(name);
  }
  return nullptr;
}

void PythonStacks::resolve_interpreter() {
  Api a;
  // An object found outside the global scope may since have been unloaded
  // (before_dlclose() made this search run again): find it anew.
  if (symbols_from_ == SymbolSource::kLocalObject) symbols_from_ = SymbolSource::kGlobalScope;
  // Where the interpreter's symbols are: the global scope (a python
  // executable, a program linked with libpython); else an object outside it
  // (a plugin that links libpython, dlopen()ed RTLD_LOCAL, as dlopen does by
  // default); else the program's own symbol table (program_symbols.h).
  // Decided once an interpreter is found; until then, searched again.
  auto sym = [this](const char* name) { return interpreter_symbol(name); };
  a.is_initialized = reinterpret_cast<int (*)()>(sym("Py_IsInitialized"));
  if (!a.is_initialized && symbols_from_ == SymbolSource::kGlobalScope) {
    if (const link_map* m = elf_object_defining("Py_IsInitialized")) {
      symbols_from_ = SymbolSource::kLocalObject;
      symbols_object_ = m;
    } else {
      switch (program_python()) {
        case ProgramPython::kNone:
          break;
        case ProgramPython::kSymbols:
          symbols_from_ = SymbolSource::kProgramTable;
          break;
        case ProgramPython::kStripped:
          return turn_off(
              "the program embeds CPython (its .PyRuntime section) without exporting the interpreter's "
              "symbols, and was stripped: no symbol table names them");
        case ProgramPython::kDisagrees:
          return turn_off(
              "the program embeds CPython (its .PyRuntime section) without exporting the interpreter's "
              "symbols, and its symbol table's _PyRuntime is not that section");
      }
    }
    // From the source just found (the global scope was asked above).
    if (symbols_from_ != SymbolSource::kGlobalScope) a.is_initialized = reinterpret_cast<int (*)()>(sym("Py_IsInitialized"));
  }
  symbol_seen_ = a.is_initialized != nullptr;
  if (!a.is_initialized) {  // no interpreter (yet): look again later
    state_.store(kUnresolved, std::memory_order_release);
    return;
  }
  if (!a.is_initialized()) {  // loaded, not started: capture() asks it on each copy from now on
    awaited_.store(a.is_initialized, std::memory_order_relaxed);
    state_.store(kAwaiting, std::memory_order_release);
    return;
  }
  uint32_t version = 0;
  if (const void* v = sym("Py_Version")) {  // 3.11+: PY_VERSION_HEX
    unsigned long hex = 0;
    std::memcpy(&hex, v, sizeof hex);
    version = static_cast<uint32_t>((hex >> 16) & 0xffff);
  } else if (auto get_version = reinterpret_cast<const char* (*)()>(sym("Py_GetVersion"))) {
    version = parse_version_string(get_version());
  }
  if (version == 0) return turn_off("the interpreter's version could not be read");
  const std::string name = "CPython " + version_text(version);
  if (sym("_Py_NegativeRefcount")) return turn_off(name + " is a debug build, whose objects are laid out differently");
  std::string why;
  const char* source = "from its headers";
  if (version >= 0x030d) {
    if (!layout_from_debug_offsets(sym("_PyRuntime"), version, layout_, why)) return turn_off(name + ": " + why);
    source = "from its _Py_DebugOffsets";
  } else if (const PyLayout* l = generated_layout(version)) {
    layout_ = *l;
  } else {
    return turn_off(name + ": no frame layout for this version (3.10 to 3.15 are known)");
  }
  a.this_thread_state = reinterpret_cast<void* (*)()>(sym("PyGILState_GetThisThreadState"));
  a.main_interpreter = reinterpret_cast<void* (*)()>(sym("PyInterpreterState_Main"));
  a.code_type = reinterpret_cast<uint64_t>(sym("PyCode_Type"));
  a.unicode_type = reinterpret_cast<uint64_t>(sym("PyUnicode_Type"));
  a.bytes_type = reinterpret_cast<uint64_t>(sym("PyBytes_Type"));
  a.none_object = reinterpret_cast<uint64_t>(sym("_Py_NoneStruct"));
  a.is_finalizing = reinterpret_cast<int (*)()>(sym(version >= 0x030d ? "Py_IsFinalizing" : "_Py_IsFinalizing"));
  if (!a.this_thread_state || !a.main_interpreter || !a.code_type || !a.unicode_type || !a.bytes_type)
    return turn_off(name + ": a function or type the walk needs is not exported");
  api_ = a;
  runtime_ = static_cast<const unsigned char*>(sym("_PyRuntime"));
  const bool from_runtime = runtime_ && has_runtime_fields(layout_);
  runtime_reads_.store(from_runtime ? kApiUntilChecked : kApiOnly, std::memory_order_relaxed);
  {
    std::lock_guard<RankedMutex> lock(note_mutex_);
    notes_.push_back("Python frames in call stacks: " + name + " (frame layout " + source + symbols_note() +
                     "), under at most " +
                     std::to_string(std::min(config().python_native_depth, config().stack_depth)) +
                     " native frames (CUXFER_PYTHON_NATIVE_DEPTH); thread state " +
                     (from_runtime ? "read from _PyRuntime once a read agrees with the C API"
                      : layout_.rt_tss_key == kNoField && layout_.rt_main != kNoField
                          ? "through the C API (this version keeps it in a C thread-local)"
                          : "through the C API (no _PyRuntime layout for this version)"));
  }
  state_.store(kReady, std::memory_order_release);
}

template <ReadMode M>
CUXFER_HOT uint32_t PythonStacks::intern_code(const PyLayout& l, uint64_t code) noexcept {
  CodeTable::Key k;
  k.code = code;
  if (!get<M>(code + l.code_filename, k.filename) || !get<M>(code + l.code_qualname, k.qualname) ||
      !get<M>(code + l.code_line_table, k.line_table) || !get<M>(code + l.code_first_line, k.first_line))
    return 0;
  // A code object met before sits in its first probe slot almost always.
  if (const uint32_t id = codes_.find_fast(k)) return id;
  struct Ctx {
    const PythonStacks* self;
    const CodeTable::Key* key;
  } ctx{this, &k};
  auto fill = [](void* p, trace::PyCode& out) -> bool {
    const Ctx& c = *static_cast<const Ctx*>(p);
    const PyLayout& lay = c.self->layout_;
    out.version = lay.version;
    out.first_line = c.key->first_line;
    return read_unicode<M>(lay, c.self->api_.unicode_type, c.key->filename, out.filename) &&
           read_unicode<M>(lay, c.self->api_.unicode_type, c.key->qualname, out.qualname) &&
           read_pybytes<M>(lay, c.self->api_.bytes_type, c.key->line_table, out.line_table);
  };
  return codes_.intern(k, fill, &ctx);
}

template <ReadMode M>
CUXFER_HOT uint32_t PythonStacks::walk(uint64_t tstate, uint64_t* out, uint32_t max, bool& failed) noexcept {
  // One instantiation per frame model: the per-frame loop has no model tests.
  switch (layout_.model) {
    case FrameModel::Legacy310: return walk_frames<M, FrameModel::Legacy310>(tstate, out, max, failed);
    case FrameModel::Interp311: return walk_frames<M, FrameModel::Interp311>(tstate, out, max, failed);
    case FrameModel::Interp312: return walk_frames<M, FrameModel::Interp312>(tstate, out, max, failed);
    case FrameModel::Interp313: return walk_frames<M, FrameModel::Interp313>(tstate, out, max, failed);
  }
  return 0;
}

template <ReadMode M, FrameModel Model>
CUXFER_HOT uint32_t PythonStacks::walk_frames(uint64_t tstate, uint64_t* out, uint32_t max, bool& failed) noexcept {
  // A local copy: the stores to `out` cannot alias it, so its offsets stay
  // in registers across the loop.
  PyLayout l = layout_;
  if (l.code_qualname == kNoField) l.code_qualname = l.code_name;  // 3.10: co_name
  const uint64_t code_type = api_.code_type, none_object = api_.none_object;
  // A cold capture notes what it reads first of each object (the thread
  // state, the innermost kNoteFrames frames) for the next one's prefetches
  // (core/prefetch_trail.h): the walk is a chain of dependent loads.
  constexpr uint32_t kNoteFrames = 8;
  PrefetchTrail::Writer trail(prefetch_trail(), PrefetchTrail::kPython);
  const bool noting = trail.on();
  // Reading directly, a walk preempted across the start of finalization
  // could resume on a thread state, frames and code objects it frees and
  // unmaps (a daemon thread copying as the interpreter exits): every pointer
  // read from them is followed only while finalization has not begun, a
  // window of a few loads instead of the whole walk. walk_thread() then drops
  // what was read. _PyRuntime's flag, where the layout has it, is one load.
  const uint64_t* finalizing_flag =
      M == ReadMode::Direct && runtime_ && l.rt_finalizing != kNoField
          ? reinterpret_cast<const uint64_t*>(runtime_ + l.rt_finalizing)
          : nullptr;
  auto finalizing = [&]() __attribute__((always_inline)) {
    return finalizing_flag ? __atomic_load_n(finalizing_flag, __ATOMIC_RELAXED) != 0 : finalization_began();
  };
  uint64_t frame = 0;
  if constexpr (Model == FrameModel::Interp311 || Model == FrameModel::Interp312) {
    uint64_t cframe = 0;
    trail.note(tstate + l.ts_cframe);
    if (!get<M>(tstate + l.ts_cframe, cframe)) return failed = true, 0;
    if (!cframe) return 0;
    // The thread state is freed as finalization begins, and its memory may
    // hold anything by now: its cframe is followed only while finalization
    // has not begun (a daemon thread's walk crashed here on 3.11, reading a
    // "cframe" that was string data, 2 runs in 800 with 16 copying threads).
    if constexpr (M == ReadMode::Direct) {
      if (finalizing()) return 0;
    }
    trail.note(cframe + l.cframe_current_frame);
    if (!get<M>(cframe + l.cframe_current_frame, frame)) return failed = true, 0;
  } else {
    trail.note(tstate + l.ts_frame);
    if (!get<M>(tstate + l.ts_frame, frame)) return failed = true, 0;
  }
  uint32_t n = 0;
  for (uint32_t steps = 0; frame && n < max && steps < 1024; ++steps) {
    if constexpr (M == ReadMode::Direct) {
      if (finalizing()) return n;
    }
    uint64_t code = 0, previous = 0;
    if (!get<M>(frame + l.frame_code, code) || !get<M>(frame + l.frame_previous, previous))
      return failed = true, n;
    // 3.14+: a tagged stack reference; the bits CPython clears to get the object.
    if constexpr (Model == FrameModel::Interp313) code &= ~static_cast<uint64_t>(l.frame_code_tag_bits);
    if (noting && n < kNoteFrames) {
      trail.note(frame + l.frame_code);
      trail.note(code + l.object_type);
      trail.note(codes_.slot_address(code));
    }
    if constexpr (Model == FrameModel::Interp312 || Model == FrameModel::Interp313) {
      uint8_t owner = 0;
      if (!get<M>(frame + l.frame_owner, owner)) return failed = true, n;
      if (owner >= l.frame_owner_not_python) {
        // An eval-loop entry: the Python frame just inside it is its outermost.
        if (n) out[n - 1] |= trace::kPythonEntryBit;
        frame = previous;
        continue;
      }
    }
    uint64_t type = 0;
    if (code == 0 || !get<M>(code + l.object_type, type) || type != code_type) {
      // After the owner (the eval loop's entry frame holds None), and only
      // off the common path: a frame whose executable is null or None runs
      // no code object (3.13+ allow both), not a Python function's frame,
      // and not a misread.
      if (Model == FrameModel::Interp313 && (code == 0 || code == none_object)) {
        frame = previous;
        continue;
      }
      return failed = true, n;
    }
    uint32_t offset = 0;
    bool entry = false;
    if constexpr (Model == FrameModel::Legacy310) {
      int32_t lasti = 0;
      if (!get<M>(frame + l.frame_instr, lasti)) return failed = true, n;
      offset = lasti > 0 ? static_cast<uint32_t>(lasti) * 2 : 0;
      entry = true;  // every 3.10 frame runs in its own eval-loop call
    } else {
      uint64_t instr = 0;
      if (!get<M>(frame + l.frame_instr, instr)) return failed = true, n;
      const uint64_t bytecode = code + l.code_bytecode;
      if (instr < bytecode || instr - bytecode > 0xffffffffull) {  // being set up: not running yet
        frame = previous;
        continue;
      }
      offset = static_cast<uint32_t>(instr - bytecode);
      if constexpr (Model == FrameModel::Interp311) {
        uint8_t is_entry = 0;
        if (!get<M>(frame + l.frame_is_entry, is_entry)) return failed = true, n;
        entry = is_entry != 0;
      }
    }
    out[n++] = trace::encode_python_frame(intern_code<M>(l, code), offset, entry);
    frame = previous;
  }
  return n;
}

CUXFER_HOT bool PythonStacks::finalization_began() const noexcept {
  if (runtime_ && layout_.rt_finalizing != kNoField) return load_field<uint64_t>(runtime_, layout_.rt_finalizing) != 0;
  return api_.is_finalizing && api_.is_finalizing();
}

CUXFER_HOT bool PythonStacks::thread_state(uint64_t& tstate, uint64_t& main) noexcept {
  const int reads = runtime_reads_.load(std::memory_order_relaxed);
  if (reads == kFromRuntime) {
    const RuntimeRead r = read_runtime(runtime_, layout_);
    tstate = r.tstate;
    main = r.main;
    return r.live;
  }
  // Before and after the interpreter's life the thread-state key is not
  // valid (an uninitialised key reads another library's thread-local).
  if (!api_.is_initialized() || (api_.is_finalizing && api_.is_finalizing())) return false;
  tstate = reinterpret_cast<uint64_t>(api_.this_thread_state());
  if (!tstate) return true;  // a thread the interpreter never saw: no more calls for it
  main = reinterpret_cast<uint64_t>(api_.main_interpreter());
  if (reads == kApiUntilChecked) check_runtime_read(tstate, main);
  return true;
}

void PythonStacks::check_runtime_read(uint64_t tstate, uint64_t main) noexcept {
  // A disagreement (a build whose _PyRuntime is laid out otherwise) keeps
  // the C API, said once.
  const bool agree = agrees_with_api(read_runtime(runtime_, layout_), tstate, main);
  int expected = kApiUntilChecked;
  if (!runtime_reads_.compare_exchange_strong(expected, agree ? kFromRuntime : kApiOnly, std::memory_order_relaxed) ||
      agree)
    return;
  std::lock_guard<RankedMutex> lock(note_mutex_);
  notes_.push_back("Python thread state: _PyRuntime of CPython " + version_text(layout_.version) +
                   " did not read as its layout says; read through the C API instead (a copy costs more)");
}

CUXFER_HOT uint32_t PythonStacks::capture(uint64_t* out, uint32_t max) noexcept {
  if (max == 0) return 0;
  if (state_.load(std::memory_order_acquire) != kReady) {
    // A program without an interpreter (or with one the shim cannot read)
    // comes here on every copy: capture_gated() lets a thread look only every
    // kGateCalls-th copy (a thread's first copy looks), and the time-stamp
    // counter (rdtsc, ~18 ns in the H200's VM, where the clock costs 30-40)
    // spaces the searches further.
    t_calls_to_gate = kGateCalls - 1;
    int state = state_.load(std::memory_order_acquire);
    if (state == kUnresolved) {
      const uint64_t tsc = __rdtsc();
      if (tsc < next_try_tsc_.load(std::memory_order_relaxed)) return 0;
      next_try_tsc_.store(tsc + kRetryTicks, std::memory_order_relaxed);
      resolve(now_ns());
      state = state_.load(std::memory_order_acquire);
    }
    if (state == kAwaiting) {
      // An interpreter is loaded and not yet started: a program that embeds
      // Python and copies before it starts it. Py_IsInitialized() reads one
      // flag; asked on every copy, the first copy its script makes already
      // has its line (the gates above would miss a short script's copies).
      t_calls_to_gate = 0;
      int (*is_initialized)() = awaited_.load(std::memory_order_relaxed);
      if (!is_initialized || !is_initialized()) return 0;
      int expected = kAwaiting;
      if (!state_.compare_exchange_strong(expected, kResolving, std::memory_order_acq_rel)) return 0;
      resolve_interpreter();
      state = state_.load(std::memory_order_acquire);
    }
    if (state != kReady) return 0;
    t_calls_to_gate = 0;
  }
  uint64_t tstate = 0, main = 0;
  if (!thread_state(tstate, main) || !tstate) return 0;  // no interpreter now, or a thread it never saw
  return walk_thread(tstate, main, out, max);
}

CUXFER_HOT uint32_t PythonStacks::walk_thread(uint64_t tstate, uint64_t main, uint64_t* out, uint32_t max) noexcept {
  prefetch_trail().note(PrefetchTrail::kPython, tstate + layout_.ts_interp);
  bool failed = false;
  uint32_t n = 0;
  uint64_t interp = 0;
  // Finalization frees daemon threads' states and frames, and may have
  // begun after thread_state() found the interpreter live: a walk that
  // overlapped it read memory that may belong to something else by now.
  // Its frames are not trusted (the copy is recorded without them), and
  // what it read says nothing about the layout or the interpreter.
  auto finalizing = [&] { return api_.is_finalizing && api_.is_finalizing(); };
  const bool checked = checked_walks_.load(std::memory_order_relaxed) < kCheckedWalks;
  if (checked) {
    if (!get<ReadMode::Checked>(tstate + layout_.ts_interp, interp)) failed = true;
    else if (interp == main) n = walk<ReadMode::Checked>(tstate, out, max, failed);
  } else {
    get<ReadMode::Direct>(tstate + layout_.ts_interp, interp);
    if (interp == main) n = walk<ReadMode::Direct>(tstate, out, max, failed);
  }
  if (finalizing()) return 0;
  if (!failed && interp != main) return note_subinterpreter(), 0;  // a subinterpreter's thread: not walked
  if (checked && !failed && n) checked_walks_.fetch_add(1, std::memory_order_relaxed);
  if (failed) {
    state_.store(kOff, std::memory_order_release);
    turn_off("a frame of CPython " + version_text(layout_.version) +
             " did not read as its layout says (a build this walk does not know)");
    return 0;
  }
  return n;
}

}  // namespace cuxfer::shim::python
