// Choosing the user's frame, and offline symbolization with libdw.
#include <gtest/gtest.h>

#include <elf.h>
#include <link.h>

#include <climits>
#include <cstdlib>

#include "analyzer/symbolize/frame_filter.h"
#include "analyzer/symbolize/symbolizer.h"

extern "C" __attribute__((noinline)) int cuxfer_test_marker_function(int x) {
  asm volatile("" ::: "memory");
  return x * 3 + 1;
}

extern "C" __attribute__((noinline)) uint64_t cuxfer_test_return_address() {
  return reinterpret_cast<uint64_t>(__builtin_return_address(0));
}
static inline __attribute__((always_inline)) uint64_t cuxfer_test_inlined_helper() {
  return cuxfer_test_return_address();  // the call whose return address is resolved
}
extern "C" __attribute__((noinline)) uint64_t cuxfer_test_outer_function() {
  uint64_t r = cuxfer_test_inlined_helper();
  asm volatile("" ::: "memory");  // no tail call: keep the return address inside us
  return r;
}

namespace cuxfer::symbolize {
namespace {

Frame frame(std::string module, std::string function = "") {
  Frame f;
  f.module = std::move(module);
  f.function = std::move(function);
  return f;
}

TEST(FrameFilter, SkipsShimCudaAndStartFrames) {
  std::vector<Frame> stack = {
      frame("/opt/cuxfer/lib/libcuxfer.so", "cuxfer::hook_cuMemcpyHtoD"),
      frame("/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
      frame("/usr/local/cuda/lib64/libcudart.so.13", "cudaMemcpy"),
      frame("/opt/app/train", "cudart::driverHelper::memcpyDispatch"),  // static cudart
      frame("/opt/app/train", "__cudart1234"),
      frame("/opt/app/train", "load_batch(Batch&)"),
      frame("/opt/app/train", "main"),
      frame("/lib/x86_64-linux-gnu/libc.so.6", "__libc_start_call_main"),
  };
  EXPECT_EQ(choose_user_frame(stack), 5u);
}

TEST(FrameFilter, FallsBackToFirstFrameOutsideTheShim) {
  std::vector<Frame> stack = {frame("/x/libcuxfer.so", "hook"),
                              frame("/usr/lib/libcudart.so.12", "cudaMemcpy"),
                              frame("/lib/libc.so.6", "__libc_start_main")};
  EXPECT_EQ(choose_user_frame(stack), 1u);
  EXPECT_EQ(choose_user_frame({}), 0u);
  EXPECT_EQ(choose_user_frame({frame("/opt/app/train", "")}), 0u);
}

TEST(FrameFilter, Names) {
  EXPECT_TRUE(is_cuda_or_shim_module("/usr/lib/x86_64-linux-gnu/libcuda.so.580.65"));
  EXPECT_TRUE(is_cuda_or_shim_module("libcudart.so.13"));
  EXPECT_FALSE(is_cuda_or_shim_module("/opt/app/libcudaworks.so.1x"));
  EXPECT_FALSE(is_cuda_or_shim_module("/opt/torch/lib/libtorch_cuda.so"));
  EXPECT_TRUE(is_static_cudart_function("cudaMemcpyAsync"));
  EXPECT_TRUE(is_static_cudart_function("__cudaRegisterFatBinary"));
  EXPECT_FALSE(is_static_cudart_function("at::native::copy_"));
}

TEST(Frame, Display) {
  Frame f;
  f.address = 0x7f0000001234;
  EXPECT_EQ(f.display(), "0x7f0000001234");
  f.module = "/opt/app/libx.so";
  f.offset = 0x1234;
  EXPECT_EQ(f.display(), "libx.so+0x1234");
  f.function = "load_batch(Batch&)";
  f.file = "/src/load.cpp";
  f.line = 42;
  EXPECT_EQ(f.display(), "load_batch(Batch&) (/src/load.cpp:42)");
}

// The test executable as the trace's ModuleInfo would describe it.
trace::ModuleInfo self_module() {
  trace::ModuleInfo m;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* out = static_cast<trace::ModuleInfo*>(data);
        if (info->dlpi_name && info->dlpi_name[0]) return 0;  // the main program has no name
        out->base = info->dlpi_addr;
        out->low = UINT64_MAX;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          out->low = std::min<uint64_t>(out->low, info->dlpi_addr + ph.p_vaddr);
          out->high = std::max<uint64_t>(out->high, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        return 1;
      },
      &m);
  char buf[PATH_MAX];
  if (realpath("/proc/self/exe", buf)) m.path = buf;
  return m;
}

TEST(Symbolizer, ModuleAndOffsetWithoutSymbols) {
  auto sym = make_symbolizer(false);
  std::vector<trace::ModuleInfo> modules = {self_module()};
  auto addr = reinterpret_cast<uint64_t>(&cuxfer_test_marker_function) + 4;
  Frame f = sym->resolve(modules, addr);
  EXPECT_EQ(f.module, modules[0].path);
  EXPECT_EQ(f.offset, addr - modules[0].base);
  EXPECT_TRUE(f.function.empty());
  EXPECT_TRUE(sym->notes().empty());
  Frame none = sym->resolve(modules, 16);  // no module contains it
  EXPECT_TRUE(none.module.empty());
  EXPECT_EQ(none.address, 16u);
}

#ifdef CUXFER_HAVE_LIBDW
TEST(Symbolizer, NamesFunctionAndLineOffline) {
  ASSERT_EQ(cuxfer_test_marker_function(1), 4);
  auto sym = make_symbolizer(true);
  std::vector<trace::ModuleInfo> modules = {self_module()};
  auto addr = reinterpret_cast<uint64_t>(&cuxfer_test_marker_function) + 4;
  Frame f = sym->resolve(modules, addr);
  EXPECT_EQ(f.function, "cuxfer_test_marker_function");
  EXPECT_NE(f.file.find("symbolize_test.cpp"), std::string::npos) << f.file;
  EXPECT_GT(f.line, 0);
  Frame again = sym->resolve(modules, addr);  // cached
  EXPECT_EQ(again.function, f.function);
  EXPECT_TRUE(sym->notes().empty());
}

TEST(Symbolizer, NamesTheInlinedFunctionAtAReturnAddress) {
  auto sym = make_symbolizer(true);
  std::vector<trace::ModuleInfo> modules = {self_module()};
  Frame f = sym->resolve(modules, cuxfer_test_outer_function());
  // The line is the call inside the inlined helper, and so is the name.
  EXPECT_TRUE(f.function.starts_with("cuxfer_test_inlined_helper")) << f.function;
  EXPECT_NE(f.file.find("symbolize_test.cpp"), std::string::npos);
  EXPECT_GT(f.line, 0);
}

TEST(Symbolizer, MissingFileIsNamedModuleOffsetAndSaidOnce) {
  auto sym = make_symbolizer(true);
  std::vector<trace::ModuleInfo> modules = {{0x10000, 0x10000, 0x20000, "/nonexistent/libgone.so", "aa"}};
  Frame a = sym->resolve(modules, 0x10100);
  Frame b = sym->resolve(modules, 0x10200);
  EXPECT_EQ(a.display(), "libgone.so+0x100");
  EXPECT_EQ(b.offset, 0x200u);
  ASSERT_EQ(sym->notes().size(), 1u);
  EXPECT_NE(sym->notes()[0].find("/nonexistent/libgone.so"), std::string::npos);
}

TEST(Symbolizer, ChangedFileIsNotTrusted) {
  auto sym = make_symbolizer(true);
  trace::ModuleInfo m = self_module();
  m.build_id = "00112233445566778899aabbccddeeff00112233";
  std::vector<trace::ModuleInfo> modules = {m};
  Frame f = sym->resolve(modules, reinterpret_cast<uint64_t>(&cuxfer_test_marker_function) + 4);
  std::vector<std::string> notes = sym->notes();
  if (notes.empty()) GTEST_SKIP() << "test binary has no build id";
  EXPECT_TRUE(f.function.empty());
  EXPECT_NE(notes[0].find("build id differs"), std::string::npos) << notes[0];
}
#else
TEST(Symbolizer, WithoutLibdwSaysSo) {
  auto sym = make_symbolizer(true);
  ASSERT_EQ(sym->notes().size(), 1u);
  EXPECT_NE(sym->notes()[0].find("without libdw"), std::string::npos);
}
#endif

}  // namespace
}  // namespace cuxfer::symbolize

namespace cuxfer::symbolize {
namespace {

TEST(Frame, ShortDisplay) {
  Frame f;
  f.module = "/opt/app/train";
  f.function = "(anonymous namespace)::round_trips(char const*, unsigned long) [clone .part.0]";
  f.file = "/src/app/fork_app.cpp";
  f.line = 31;
  EXPECT_EQ(f.short_display(), "round_trips (fork_app.cpp:31)");
  f.function = "std::vector<int, std::allocator<int> >::push_back(int const&)";
  f.file.clear();
  EXPECT_EQ(f.short_display(), "std::vector<int, std::allocator<int> >::push_back");
  f.function = "main";
  EXPECT_EQ(f.short_display(), "main");
}

}  // namespace
}  // namespace cuxfer::symbolize
