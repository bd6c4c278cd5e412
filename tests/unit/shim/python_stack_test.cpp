// shim/python without an interpreter: the layouts, the debug offsets of 3.13
// (laid out as CPython 3.13 lays them out), 3.14 and 3.15 (as their
// interpreters held them), the code table, and a
// process that runs no Python. (Walks of real interpreters:
// e2e.python_stacks.*.)
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "python/layout.h"
#include "python/python_stack.h"
#include "python/runtime_state.h"
#include "trace/python_frame.h"

namespace cuxfer::shim::python {
namespace {

// _Py_DebugOffsets of 3.13.0 (x86-64), as its interpreter holds them at the
// start of _PyRuntime; index = u64 field number (layout.cpp's comment).
std::vector<uint64_t> debug_offsets_313() {
  std::vector<uint64_t> f(71, 8);
  std::memcpy(f.data(), "xdebugpy", 8);
  f[1] = 0x030d00f0;  // 3.13.0 final
  f[2] = 0;           // not free-threaded
  f[22] = 16;         // thread_state.interp
  f[23] = 72;         // thread_state.current_frame
  f[29] = 8;          // interpreter_frame.previous
  f[30] = 0;          // .executable
  f[31] = 56;         // .instr_ptr
  f[33] = 70;         // .owner
  f[35] = 112, f[36] = 120, f[37] = 128, f[38] = 136, f[39] = 68, f[43] = 200;  // code object
  f[45] = 8;                                                                     // ob_type
  f[65] = 16, f[66] = 32;                                                        // bytes
  f[68] = 32, f[69] = 16, f[70] = 40;                                            // unicode
  return f;
}

// _Py_DebugOffsets of 3.14 and 3.15 as Debian's builds (sid, x86-64) hold
// them at the start of _PyRuntime: every u64 after the cookie, read with
// ctypes from the running interpreters. The rows of layouts.inc say where
// each offset sits; what the walk reads from them must be what the same
// versions' headers say.
std::vector<uint64_t> debug_offsets(std::initializer_list<uint64_t> after_cookie) {
  std::vector<uint64_t> f(1 + after_cookie.size());
  std::memcpy(f.data(), "xdebugpy", 8);
  std::copy(after_cookie.begin(), after_cookie.end(), f.begin() + 1);
  return f;
}

std::vector<uint64_t> debug_offsets_314() {  // CPython 3.14.10
  return debug_offsets({
    51251952, 0, 316616, 784, 808, 225864, 7280, 7272, 7344, 7360, 7408, 7688, 7672, 7680, 16, 7784, 0, 7800,
    7792, 7992, 0, 832, 0, 8, 16, 72, 152, 160, 232, 32, 88, 8, 0, 56, 80, 74, 64, 0, 216, 112, 120, 128, 136,
    68, 52, 96, 104, 208, 0, 16, 8, 416, 24, 88, 168, 40, 32, 16, 40, 24, 16, 200, 24, 40, 32, 48, 32, 40, 24,
    16, 32, 16, 24, 40, 16, 32, 64, 32, 16, 40, 264, 192, 160, 24, 72, 67, 0, 8, 24, 304, 8076, 0, 4, 512});
}

std::vector<uint64_t> debug_offsets_315() {  // CPython 3.15.2
  return debug_offsets({
    51315440, 0, 346568, 912, 936, 226240, 7272, 7264, 7336, 7352, 7400, 7592, 7576, 7584, 16, 7736, 0, 7752,
    7744, 7944, 0, 888, 0, 8, 16, 72, 80, 88, 96, 176, 184, 256, 32, 36, 40, 136, 288, 0, 88, 8, 0, 56, 80, 74,
    64, 0, 216, 112, 120, 128, 136, 68, 52, 96, 104, 208, 0, 16, 8, 424, 24, 88, 168, 32, 288, 944, 888, 40,
    32, 16, 40, 24, 16, 200, 24, 40, 32, 48, 32, 40, 24, 16, 32, 16, 24, 40, 16, 32, 64, 32, 16, 40, 56, 176,
    112, 120, 1120, 104, 160, 24, 72, 67, 0, 8, 24, 344, 8028, 0, 4, 512});
}

TEST(PythonLayout, GeneratedRowsForTheHeaderVersions) {
  for (uint32_t v : {0x030au, 0x030bu, 0x030cu}) {
    const PyLayout* l = generated_layout(v);
    ASSERT_NE(l, nullptr) << std::hex << v;
    EXPECT_EQ(l->version, v);
    EXPECT_EQ(l->object_type, 8u);  // PyObject: refcount, then type
  }
  EXPECT_EQ(generated_layout(0x030a)->model, FrameModel::Legacy310);
  EXPECT_EQ(generated_layout(0x030b)->model, FrameModel::Interp311);
  EXPECT_NE(generated_layout(0x030b)->frame_is_entry, kNoField);
  EXPECT_EQ(generated_layout(0x030c)->model, FrameModel::Interp312);
  EXPECT_EQ(generated_layout(0x0309), nullptr);
  // 3.13+: rows for their _PyRuntime fields and where their debug offsets
  // sit (their frames state their own layout).
  for (uint32_t v : {0x030du, 0x030eu, 0x030fu}) {
    ASSERT_NE(generated_layout(v), nullptr) << std::hex << v;
    EXPECT_EQ(generated_layout(v)->model, FrameModel::Interp313);
    ASSERT_NE(generated_debug_index(v), nullptr) << std::hex << v;
  }
  EXPECT_EQ(generated_debug_index(0x030c), nullptr);
  EXPECT_EQ(generated_layout(0x0310), nullptr);
  // 3.14 made a frame's code a tagged stack reference, and numbered the
  // eval loop's entry frame's owner FRAME_OWNED_BY_INTERPRETER.
  EXPECT_EQ(generated_layout(0x030d)->frame_code_tag_bits, 0u);
  EXPECT_EQ(generated_layout(0x030e)->frame_code_tag_bits, 1u);  // Py_TAG_REFCNT
  EXPECT_EQ(generated_layout(0x030f)->frame_code_tag_bits, 1u);
  for (uint32_t v : {0x030cu, 0x030du, 0x030eu, 0x030fu})
    EXPECT_EQ(generated_layout(v)->frame_owner_not_python, 3u) << std::hex << v;
  // Every generated row to 3.14 says where _PyRuntime keeps what the C API
  // reads; before 3.12 the GIL-state machinery's interpreter as well. 3.15
  // keeps the thread's state in a C thread-local: the C API it is.
  for (uint32_t v : {0x030au, 0x030bu, 0x030cu, 0x030du, 0x030eu})
    EXPECT_TRUE(has_runtime_fields(*generated_layout(v))) << std::hex << v;
  EXPECT_FALSE(has_runtime_fields(*generated_layout(0x030f)));
  EXPECT_NE(generated_layout(0x030b)->rt_auto_interp, kNoField);
  EXPECT_EQ(generated_layout(0x030c)->rt_auto_interp, kNoField);
}

TEST(PythonLayout, DebugOffsetsOf313) {
  const auto f = debug_offsets_313();
  PyLayout l{};
  std::string why;
  ASSERT_TRUE(layout_from_debug_offsets(f.data(), 0x030d, l, why)) << why;
  EXPECT_EQ(l.model, FrameModel::Interp313);
  EXPECT_EQ(l.ts_frame, 72u);
  EXPECT_EQ(l.ts_cframe, kNoField);
  EXPECT_EQ(l.frame_previous, 8u);
  EXPECT_EQ(l.frame_code, 0u);
  EXPECT_EQ(l.frame_instr, 56u);
  EXPECT_EQ(l.frame_owner, 70u);
  EXPECT_EQ(l.code_filename, 112u);
  EXPECT_EQ(l.code_qualname, 128u);
  EXPECT_EQ(l.code_first_line, 68u);
  EXPECT_EQ(l.code_line_table, 136u);
  EXPECT_EQ(l.code_bytecode, 200u);
  EXPECT_EQ(l.str_ascii_size, 40u);
  EXPECT_EQ(l.str_compact_size, 56u);
  EXPECT_EQ(l.bytes_data, 32u);
  // Not among the debug offsets: _PyRuntime's fields come from the row made
  // from 3.13's headers; the frames from the debug offsets, even where the
  // row says otherwise (a 3.13.x that moved a field).
  const PyLayout& row = *generated_layout(0x030d);
  auto moved = f;
  moved[23] = row.ts_frame + 8;  // the thread's current frame
  PyLayout m{};
  ASSERT_TRUE(layout_from_debug_offsets(moved.data(), 0x030d, m, why)) << why;
  EXPECT_EQ(m.ts_frame, row.ts_frame + 8);
  EXPECT_TRUE(has_runtime_fields(l));
  EXPECT_EQ(l.rt_initialized, row.rt_initialized);
  EXPECT_EQ(l.rt_finalizing, row.rt_finalizing);
  EXPECT_EQ(l.rt_main, row.rt_main);
  EXPECT_EQ(l.rt_auto_interp, kNoField);
  EXPECT_EQ(l.rt_tss_created, row.rt_tss_created);
  EXPECT_EQ(l.rt_tss_key, row.rt_tss_key);
}

// The layout read from a real interpreter's debug offsets is what its
// version's headers say (the row), field for field.
void expect_frames_as_row(const std::vector<uint64_t>& f, uint32_t version) {
  PyLayout l{};
  std::string why;
  ASSERT_TRUE(layout_from_debug_offsets(f.data(), version, l, why)) << why;
  const PyLayout& row = *generated_layout(version);
  EXPECT_EQ(l.model, FrameModel::Interp313);
  EXPECT_EQ(l.ts_frame, row.ts_frame);
  EXPECT_EQ(l.ts_interp, row.ts_interp);
  EXPECT_EQ(l.frame_previous, row.frame_previous);
  EXPECT_EQ(l.frame_code, row.frame_code);
  EXPECT_EQ(l.frame_instr, row.frame_instr);
  EXPECT_EQ(l.frame_owner, row.frame_owner);
  EXPECT_EQ(l.code_filename, row.code_filename);
  EXPECT_EQ(l.code_name, row.code_name);
  EXPECT_EQ(l.code_qualname, row.code_qualname);
  EXPECT_EQ(l.code_first_line, row.code_first_line);
  EXPECT_EQ(l.code_line_table, row.code_line_table);
  EXPECT_EQ(l.code_bytecode, row.code_bytecode);
  EXPECT_EQ(l.object_type, row.object_type);
  EXPECT_EQ(l.str_state, row.str_state);
  EXPECT_EQ(l.str_length, row.str_length);
  EXPECT_EQ(l.str_ascii_size, row.str_ascii_size);
  EXPECT_EQ(l.str_compact_size, row.str_compact_size);
  EXPECT_EQ(l.bytes_size, row.bytes_size);
  EXPECT_EQ(l.bytes_data, row.bytes_data);
  EXPECT_EQ(l.frame_code_tag_bits, row.frame_code_tag_bits);
  EXPECT_EQ(l.frame_owner_not_python, row.frame_owner_not_python);
  EXPECT_EQ(l.rt_tss_key, row.rt_tss_key);
}

TEST(PythonLayout, DebugOffsetsOf314And315) {
  expect_frames_as_row(debug_offsets_314(), 0x030e);
  expect_frames_as_row(debug_offsets_315(), 0x030f);
  // Each version's struct is its own: 3.15 inserted fields before the frame's.
  EXPECT_NE(generated_debug_index(0x030e)->frame_previous, generated_debug_index(0x030f)->frame_previous);
  PyLayout l{};
  std::string why;
  EXPECT_FALSE(layout_from_debug_offsets(debug_offsets_314().data(), 0x030f, l, why));
  EXPECT_NE(why.find("another version"), std::string::npos) << why;
}

TEST(PythonLayout, DebugOffsetsRefused) {
  PyLayout l{};
  std::string why;
  auto f = debug_offsets_313();
  EXPECT_FALSE(layout_from_debug_offsets(nullptr, 0x030d, l, why));
  EXPECT_FALSE(layout_from_debug_offsets(f.data(), 0x0310, l, why));  // 3.16's struct is unknown
  EXPECT_NE(why.find("no layout"), std::string::npos) << why;
  auto bad = f;
  std::memcpy(bad.data(), "xdebugpz", 8);
  EXPECT_FALSE(layout_from_debug_offsets(bad.data(), 0x030d, l, why));
  bad = f;
  bad[1] = 0x030c01f0;  // says 3.12
  EXPECT_FALSE(layout_from_debug_offsets(bad.data(), 0x030d, l, why));
  bad = f;
  bad[2] = 1;
  EXPECT_FALSE(layout_from_debug_offsets(bad.data(), 0x030d, l, why));
  EXPECT_NE(why.find("free-threaded"), std::string::npos);
  bad = f;
  bad[23] = 1ull << 40;
  EXPECT_FALSE(layout_from_debug_offsets(bad.data(), 0x030d, l, why));
}

struct FillCtx {
  int calls = 0;
  bool ok = true;
  std::string name;
};

bool fill(void* p, trace::PyCode& out) {
  auto& c = *static_cast<FillCtx*>(p);
  ++c.calls;
  out.qualname = c.name;
  out.filename = "train.py";
  out.first_line = 7;
  return c.ok;
}

TEST(CodeTable, InternsOnceAndSendsOnce) {
  CodeTable t;
  FillCtx ctx{0, true, "load_batch"};
  CodeTable::Key a{0x1000, 0x2000, 0x3000, 0x4000, 7};
  const uint32_t id = t.intern(a, fill, &ctx);
  EXPECT_GE(id, 1u);
  EXPECT_EQ(t.intern(a, fill, &ctx), id);
  EXPECT_EQ(ctx.calls, 1);
  CodeTable::Key b = a;
  b.first_line = 8;  // another code object at a reused address
  const uint32_t id_b = t.intern(b, fill, &ctx);
  EXPECT_NE(id_b, id);
  std::vector<trace::PyCode> out;
  t.collect_new(out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].qualname, "load_batch");
  out.clear();
  t.collect_new(out);
  EXPECT_TRUE(out.empty());
  t.mark_all_unwritten();  // a fork child's new trace needs them again
  t.collect_new(out);
  EXPECT_EQ(out.size(), 2u);
}

TEST(CodeTable, AFailedCopyIsNotRetriedIntoNewSlots) {
  CodeTable t;
  FillCtx ctx{0, false, "x"};
  CodeTable::Key a{0x1000, 0x2000, 0x3000, 0x4000, 1};
  EXPECT_EQ(t.intern(a, fill, &ctx), 0u);
  EXPECT_EQ(t.intern(a, fill, &ctx), 0u);
  EXPECT_EQ(ctx.calls, 1);
  std::vector<trace::PyCode> out;
  t.collect_new(out);
  EXPECT_TRUE(out.empty());
}

// A stand-in _PyRuntime laid out as 3.11's generated row says, with a real
// thread-specific key, as PyGILState_GetThisThreadState would read it.
class RuntimeReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    l = *generated_layout(0x030b);
    ASSERT_EQ(pthread_key_create(&key, nullptr), 0);
    ASSERT_EQ(pthread_setspecific(key, &thread_state), 0);
    put<int>(l.rt_initialized, 1);
    put<uint64_t>(l.rt_finalizing, 0);
    put<uint64_t>(l.rt_main, main_interp());
    put<uint64_t>(l.rt_auto_interp, main_interp());
    put<int>(l.rt_tss_created, 1);
    put<pthread_key_t>(l.rt_tss_key, key);
  }
  void TearDown() override { pthread_key_delete(key); }
  template <typename T>
  void put(uint32_t off, T v) {
    ASSERT_LE(off + sizeof v, sizeof runtime);
    std::memcpy(runtime + off, &v, sizeof v);
  }
  uint64_t main_interp() const { return reinterpret_cast<uint64_t>(&interp); }
  uint64_t tstate() const { return reinterpret_cast<uint64_t>(&thread_state); }
  RuntimeRead read() const { return read_runtime(runtime, l); }

  alignas(64) unsigned char runtime[4096] = {};
  PyLayout l{};
  pthread_key_t key{};
  int thread_state = 0, interp = 0;
};

TEST_F(RuntimeReadTest, ReadsWhatTheApiWould) {
  const RuntimeRead r = read();
  EXPECT_TRUE(r.live);
  EXPECT_EQ(r.tstate, tstate());
  EXPECT_EQ(r.main, main_interp());
  EXPECT_TRUE(agrees_with_api(r, tstate(), main_interp()));
}

TEST_F(RuntimeReadTest, NotLiveBeforeOrAfterTheInterpretersLife) {
  put<int>(l.rt_initialized, 0);
  EXPECT_FALSE(read().live);
  put<int>(l.rt_initialized, 1);
  put<uint64_t>(l.rt_finalizing, 0x1234);  // the finalising thread's state
  EXPECT_FALSE(read().live);
  EXPECT_FALSE(agrees_with_api(read(), tstate(), main_interp()));
}

TEST_F(RuntimeReadTest, NoThreadStateWithoutAValidKey) {
  put<int>(l.rt_tss_created, 0);  // deleted (PyThread_tss_delete): never read the key
  EXPECT_TRUE(read().live);
  EXPECT_EQ(read().tstate, 0u);
  put<int>(l.rt_tss_created, 1);
  put<uint64_t>(l.rt_auto_interp, 0);  // before 3.12: the GIL-state machinery finalised
  EXPECT_EQ(read().tstate, 0u);
}

TEST_F(RuntimeReadTest, AWrongLayoutDisagreesAndIsNotTrusted) {
  // The key's offset one int off (another build of this version): the read
  // finds no state or another, never the API's.
  PyLayout shifted = l;
  shifted.rt_tss_key += 4;
  EXPECT_FALSE(agrees_with_api(read_runtime(runtime, shifted), tstate(), main_interp()));
  shifted = l;
  shifted.rt_main += 8;
  EXPECT_FALSE(agrees_with_api(read_runtime(runtime, shifted), tstate(), main_interp()));
  // A thread without a state proves nothing, whatever the read says.
  EXPECT_FALSE(agrees_with_api(RuntimeRead{true, 0, main_interp()}, 0, main_interp()));
}

TEST(PythonStacks, NoInterpreterNoFramesNoNote) {
  // This test program has no libpython: nothing is found, nothing is said,
  // and it is looked for again later (a program may load Python late).
  uint64_t frames[8];
  EXPECT_EQ(PythonStacks::instance().capture(frames, 8), 0u);
  EXPECT_EQ(PythonStacks::instance().capture(frames, 0), 0u);
  std::string note;
  EXPECT_FALSE(PythonStacks::instance().take_note(note));
}

TEST(PythonStacks, SearchesAgainOnlyWhenSomethingCanHaveChanged) {
  // No interpreter symbol, nothing loaded since the last search: no search
  // (a C++ program's copies never pay for the symbol-table walk again).
  EXPECT_FALSE(search_for_interpreter(false, 41, 41));
  // An object was loaded (perhaps libpython, or something that embeds it).
  EXPECT_TRUE(search_for_interpreter(false, 42, 41));
  // The first search, and a loader that does not count: search.
  EXPECT_TRUE(search_for_interpreter(false, 41, 0));
  EXPECT_TRUE(search_for_interpreter(false, 0, 0));
  // The symbol is there but the interpreter was not yet initialised: the
  // next retry must look again whatever the loader did.
  EXPECT_TRUE(search_for_interpreter(true, 41, 41));
}

// A thread's frames laid out in this process's memory as CPython 3.14 lays
// them out (the offsets its debug offsets state), walked as capture() walks
// a real one: what 3.14 changed (a tagged code reference, the entry frame's
// owner, executables that are null or None) and what a wrong layout does.
class FrameWalk : public ::testing::Test {
 protected:
  // An object of `size` bytes whose type is `type` (at the layout's offset).
  uint64_t object(uint64_t type, size_t size = 512) {
    blocks_.emplace_back(size / 8 + 1, 0);
    const uint64_t a = reinterpret_cast<uint64_t>(blocks_.back().data());
    put(a, l_.object_type, type);
    return a;
  }
  template <typename T>
  static void put(uint64_t base, uint32_t offset, T v) {
    std::memcpy(reinterpret_cast<void*>(base + offset), &v, sizeof v);
  }
  uint64_t str(const std::string& text) {  // a compact ASCII str
    const uint64_t u = object(addr(types_.unicode), l_.str_ascii_size + text.size() + 8);
    put<uint32_t>(u, l_.str_state, (1u << 2) | (1u << 5) | (1u << 6));  // kind 1, compact, ascii
    put<int64_t>(u, l_.str_length, static_cast<int64_t>(text.size()));
    std::memcpy(reinterpret_cast<void*>(u + l_.str_ascii_size), text.data(), text.size());
    return u;
  }
  uint64_t code(const std::string& file, const std::string& name, int first_line) {
    const uint64_t c = object(addr(types_.code), l_.code_bytecode + 64);
    const uint64_t table = object(addr(types_.bytes));
    put<int64_t>(table, l_.bytes_size, 0);
    put(c, l_.code_filename, str(file));
    put(c, l_.code_name, str(name));
    put(c, l_.code_qualname, str(name));
    put<int32_t>(c, l_.code_first_line, first_line);
    put(c, l_.code_line_table, table);
    return c;
  }
  // A frame running `executable` (tag bits included) at byte `offset` of its
  // code, owned by `owner`, called from `previous`.
  uint64_t frame(uint64_t executable, uint8_t owner, uint64_t previous, uint32_t offset = 0) {
    const uint64_t f = object(0, 128);
    put(f, l_.frame_code, executable);
    put(f, l_.frame_previous, previous);
    put<uint8_t>(f, l_.frame_owner, owner);
    const uint64_t code = executable & ~uint64_t(1);
    put(f, l_.frame_instr, code ? code + l_.code_bytecode + offset : 0);
    return f;
  }
  uint64_t thread(uint64_t innermost, uint64_t interp) {
    const uint64_t t = object(0, 256);
    put(t, l_.ts_frame, innermost);
    put(t, l_.ts_interp, interp);
    return t;
  }
  static uint64_t addr(const uint64_t& x) { return reinterpret_cast<uint64_t>(&x); }
  PythonStacks::KnownObjects known() const {
    return {addr(types_.code), addr(types_.unicode), addr(types_.bytes), addr(types_.none)};
  }

  void SetUp() override {
    std::string why;
    ASSERT_TRUE(layout_from_debug_offsets(debug_offsets_314().data(), 0x030e, l_, why)) << why;
  }

  struct {
    uint64_t code = 0, unicode = 0, bytes = 0, none = 0;  // stand-ins for the type objects and None
  } types_;
  PyLayout l_{};
  std::vector<std::vector<uint64_t>> blocks_;
  static constexpr uint64_t kMain = 0x5000;
};

TEST_F(FrameWalk, Python314FramesInnermostFirst) {
  const uint64_t load = code("train.py", "load_batch", 40), step = code("train.py", "step", 10);
  // Innermost first: load_batch (its code a tagged reference), the eval
  // loop's entry (owned by the interpreter), a frame whose executable is
  // None and one whose is null (no code object: not Python functions), then
  // step, a generator's frame, whose code is not tagged.
  const uint64_t f_step = frame(step, /*generator*/ 1, 0, 6);
  const uint64_t f_null = frame(/*PyStackRef_NULL*/ 1, 0, f_step);
  const uint64_t f_none = frame(addr(types_.none) | 1, 0, f_null);
  const uint64_t f_entry = frame(addr(types_.none) | 1, /*FRAME_OWNED_BY_INTERPRETER*/ 3, f_none);  // holds None
  const uint64_t f_load = frame(load | 1, 0, f_entry, 24);
  PythonStacks stacks(l_, known());
  const uint64_t tstate = thread(f_load, kMain);
  // The checked walks (process_vm_readv), then the direct ones: the same frames.
  for (uint32_t i = 0; i < PythonStacks::kCheckedWalks + 2; ++i) {
    uint64_t out[8] = {};
    ASSERT_EQ(stacks.walk_thread(tstate, kMain, out, 8), 2u) << "walk " << i;
    std::string_view file, function;
    int line = 0;
    ASSERT_TRUE(stacks.name_frame(out[0], file, function, line));
    EXPECT_EQ(function, "load_batch");
    EXPECT_EQ(file, "train.py");
    EXPECT_EQ(trace::decode_python_frame(out[0]).offset, 24u);
    EXPECT_TRUE(trace::decode_python_frame(out[0]).entry);  // the outermost frame of its eval-loop call
    ASSERT_TRUE(stacks.name_frame(out[1], file, function, line));
    EXPECT_EQ(function, "step");
    EXPECT_EQ(trace::decode_python_frame(out[1]).offset, 6u);
  }
  std::string note;
  EXPECT_FALSE(stacks.take_note(note)) << note;
}

TEST_F(FrameWalk, Python313EntryFramesHoldNone) {
  // 3.13: untagged references, the eval loop's entry owned by the C stack
  // (3), its executable None. It marks the frame inside it as its call's
  // outermost, and is not taken for a frame that failed to read.
  std::string why;
  ASSERT_TRUE(layout_from_debug_offsets(debug_offsets_313().data(), 0x030d, l_, why)) << why;
  ASSERT_EQ(l_.frame_code_tag_bits, 0u);
  const uint64_t outer = code("train.py", "main", 1), inner = code("train.py", "load_batch", 40);
  const uint64_t f_outer = frame(outer, 0, 0, 2);
  const uint64_t f_entry = frame(addr(types_.none), /*FRAME_OWNED_BY_CSTACK*/ 3, f_outer);
  const uint64_t f_inner = frame(inner, 0, f_entry, 8);
  PythonStacks stacks(l_, known());
  uint64_t out[8] = {};
  ASSERT_EQ(stacks.walk_thread(thread(f_inner, kMain), kMain, out, 8), 2u);
  EXPECT_TRUE(trace::decode_python_frame(out[0]).entry);
  EXPECT_FALSE(trace::decode_python_frame(out[1]).entry);
  std::string_view file, function;
  int line = 0;
  ASSERT_TRUE(stacks.name_frame(out[1], file, function, line));
  EXPECT_EQ(function, "main");
}

TEST_F(FrameWalk, AWrongLayoutIsTurnedOffNotFollowed) {
  const uint64_t load = code("train.py", "load_batch", 40);
  const uint64_t tstate = thread(frame(load | 1, 0, frame(load, 0, 0)), kMain);
  // A build whose frames hold the code 8 bytes further on than this layout
  // says: the first walk reads a frame pointer where a code object should
  // be, finds its type wrong, and turns Python frames off, saying so.
  PyLayout wrong = l_;
  wrong.frame_code += 8;
  PythonStacks stacks(wrong, known());
  uint64_t out[8] = {};
  EXPECT_EQ(stacks.walk_thread(tstate, kMain, out, 8), 0u);
  std::string note;
  ASSERT_TRUE(stacks.take_note(note));
  EXPECT_NE(note.find("did not read as its layout says"), std::string::npos) << note;
  // Off for good: no frame again, whatever the memory holds.
  EXPECT_EQ(stacks.walk_thread(tstate, kMain, out, 8), 0u);
  // A frame chain that leads out of mapped memory fails the checked read
  // instead of faulting.
  PythonStacks other(l_, known());
  const uint64_t lost = thread(frame(load | 1, 0, /*unmapped*/ 0x10), kMain);
  EXPECT_EQ(other.walk_thread(lost, kMain, out, 8), 0u);
  ASSERT_TRUE(other.take_note(note));
  EXPECT_NE(note.find("did not read as its layout says"), std::string::npos) << note;
}

// Interpreter shutdown: finalization frees daemon threads' states and frames,
// and may begin after the liveness check and before or during the walk. A
// walk that finds it begun when done keeps no frame (what it read may belong
// to something else by now) and does not blame the layout, in the checked
// walks and the direct ones alike.
bool g_finalizing = false;
int finalizing() { return g_finalizing ? 1 : 0; }

TEST_F(FrameWalk, AWalkThatFinalizationOverlappedKeepsNoFrame) {
  const uint64_t load = code("train.py", "load_batch", 40);
  const uint64_t tstate = thread(frame(load | 1, 0, frame(load, 0, 0)), kMain);
  PythonStacks::KnownObjects objects = known();
  objects.is_finalizing = finalizing;
  PythonStacks stacks(l_, objects);
  for (uint32_t i = 0; i < PythonStacks::kCheckedWalks + 4; ++i) {
    uint64_t out[8] = {};
    g_finalizing = false;
    ASSERT_EQ(stacks.walk_thread(tstate, kMain, out, 8), 2u) << "walk " << i;
    g_finalizing = true;
    EXPECT_EQ(stacks.walk_thread(tstate, kMain, out, 8), 0u) << "walk " << i << ": frames kept across finalization";
  }
  std::string note;
  EXPECT_FALSE(stacks.take_note(note)) << note;
  // A state already freed and reused, its frame pointer leading nowhere (a
  // checked walk: one that faults no more): no frame, and during
  // finalization no blame on the layout, Python frames left on.
  PythonStacks fresh(l_, objects);
  const uint64_t reused = thread(frame(load | 1, 0, /*unmapped*/ 0x10), kMain);
  uint64_t out[8] = {};
  g_finalizing = true;
  EXPECT_EQ(fresh.walk_thread(reused, kMain, out, 8), 0u);
  EXPECT_FALSE(fresh.take_note(note)) << note;
  g_finalizing = false;
  EXPECT_EQ(fresh.walk_thread(tstate, kMain, out, 8), 2u);
}

// 3.11 and 3.12 reach the innermost frame through the thread state's cframe.
// Finalization frees a daemon thread's state as it begins, and its memory
// may hold anything by the time a direct walk reads it: the cframe read from
// it is followed only while finalization has not begun. (A daemon thread's
// walk crashed there on 3.11, its "cframe" string data: e2e.python_finalize
// with 16 copying threads, 2 runs in 800.) The cframe here leads into a page
// that cannot be read: a walk that followed it would fault.
TEST_F(FrameWalk, ADirectWalkFollowsNoCframeOnceFinalizationBegan) {
  for (const uint32_t version : {0x030bu, 0x030cu}) {
    const PyLayout* generated = generated_layout(version);
    ASSERT_NE(generated, nullptr) << std::hex << version;
    l_ = *generated;
    ASSERT_NE(l_.ts_cframe, kNoField);
    const uint64_t load = code("train.py", "load_batch", 40);
    const uint64_t f = object(0, 256);
    put(f, l_.frame_code, load);
    put<uint64_t>(f, l_.frame_previous, 0);
    put(f, l_.frame_instr, load + l_.code_bytecode + 8);
    if (l_.frame_owner != kNoField) put<uint8_t>(f, l_.frame_owner, 0);
    if (l_.frame_is_entry != kNoField) put<uint8_t>(f, l_.frame_is_entry, 1);
    const uint64_t cframe = object(0, 256);
    put(cframe, l_.cframe_current_frame, f);
    const uint64_t tstate = object(0, 1024);
    put(tstate, l_.ts_cframe, cframe);
    put(tstate, l_.ts_interp, kMain);
    PythonStacks::KnownObjects objects = known();
    objects.is_finalizing = finalizing;
    PythonStacks stacks(l_, objects);
    g_finalizing = false;
    for (uint32_t i = 0; i < PythonStacks::kCheckedWalks + 1; ++i) {  // the checked walks, then a direct one
      uint64_t out[8] = {};
      ASSERT_EQ(stacks.walk_thread(tstate, kMain, out, 8), 1u) << std::hex << version << " walk " << std::dec << i;
    }
    const long page = sysconf(_SC_PAGESIZE);
    void* none = mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(none, MAP_FAILED);
    const uint64_t freed = object(0, 1024);  // the state's memory, reused
    put(freed, l_.ts_cframe, reinterpret_cast<uint64_t>(none));
    put(freed, l_.ts_interp, kMain);
    g_finalizing = true;
    uint64_t out[8] = {};
    EXPECT_EQ(stacks.walk_thread(freed, kMain, out, 8), 0u) << std::hex << version;
    g_finalizing = false;
    munmap(none, page);
    std::string note;
    EXPECT_FALSE(stacks.take_note(note)) << note;
  }
}

TEST_F(FrameWalk, ASubinterpretersThreadIsNotWalkedAndSaysSo) {
  const uint64_t load = code("train.py", "load_batch", 40);
  PythonStacks stacks(l_, known());
  uint64_t out[8] = {};
  EXPECT_EQ(stacks.walk_thread(thread(frame(load | 1, 0, 0), /*another interpreter*/ 0x6000), kMain, out, 8), 0u);
  EXPECT_EQ(stacks.walk_thread(thread(frame(load | 1, 0, 0), 0x6000), kMain, out, 8), 0u);
  std::string note;
  ASSERT_TRUE(stacks.take_note(note));
  EXPECT_NE(note.find("subinterpreter"), std::string::npos) << note;
  EXPECT_FALSE(stacks.take_note(note)) << "said once: " << note;
  // The main interpreter's threads are walked still.
  EXPECT_EQ(stacks.walk_thread(thread(frame(load | 1, 0, 0), kMain), kMain, out, 8), 1u);
}

}  // namespace
}  // namespace cuxfer::shim::python
