// shim/python without an interpreter: the layouts, 3.13's debug offsets read
// from a buffer laid out as CPython 3.13 lays them out, the code table, and a
// process that runs no Python. (Walks of real interpreters:
// e2e.python_stacks.*.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "python/layout.h"
#include "python/python_stack.h"
#include "python/runtime_state.h"

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
  ASSERT_NE(generated_layout(0x030d), nullptr);  // 3.13's: its _PyRuntime fields (its frames state their own)
  EXPECT_EQ(generated_layout(0x030e), nullptr);
  // Every generated row says where _PyRuntime keeps what the C API reads;
  // before 3.12 the GIL-state machinery's interpreter as well.
  for (uint32_t v : {0x030au, 0x030bu, 0x030cu, 0x030du})
    EXPECT_TRUE(has_runtime_fields(*generated_layout(v))) << std::hex << v;
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

TEST(PythonLayout, DebugOffsetsRefused) {
  PyLayout l{};
  std::string why;
  auto f = debug_offsets_313();
  EXPECT_FALSE(layout_from_debug_offsets(nullptr, 0x030d, l, why));
  EXPECT_FALSE(layout_from_debug_offsets(f.data(), 0x030e, l, why));  // 3.14's struct is another
  EXPECT_NE(why.find("no reader"), std::string::npos);
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

}  // namespace
}  // namespace cuxfer::shim::python
