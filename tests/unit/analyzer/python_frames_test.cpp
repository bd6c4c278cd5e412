// Python frames in the analyzer: naming, which frame names the site, and the
// interleaving of Python and native frames (mixed_stack).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analyzer/symbolize/frame_filter.h"
#include "analyzer/symbolize/installed_packages.h"
#include "analyzer/symbolize/mixed_stack.h"
#include "trace/python_frame.h"

namespace cuxfer::symbolize {
namespace {

Frame py(const std::string& file, int line, const std::string& fn) {
  Frame f;
  f.python = true;
  f.file = file;
  f.line = line;
  f.function = fn;
  return f;
}

Frame native(const std::string& module, const std::string& fn) {
  Frame f;
  f.module = module;
  f.function = fn;
  return f;
}

TEST(PythonFrames, Display) {
  Frame f = py("/home/me/train.py", 42, "load_batch");
  EXPECT_EQ(f.display(), "/home/me/train.py:42 in load_batch");
  EXPECT_EQ(f.short_display(), "train.py:42 in load_batch");
  f.line = 0;
  EXPECT_EQ(f.short_display(), "train.py in load_batch");
  Frame unknown;
  unknown.python = true;
  EXPECT_EQ(unknown.display(), "<unknown>");
}

TEST(PythonFrames, LibraryFiles) {
  EXPECT_TRUE(is_python_library_file("/usr/lib/python3.11/threading.py"));
  EXPECT_TRUE(is_python_library_file("/root/.pyenv/versions/3.12.1/lib/python3.12/json/decoder.py"));
  EXPECT_TRUE(is_python_library_file("/venv/lib/python3.12/site-packages/torch/_tensor.py"));
  EXPECT_TRUE(is_python_library_file("/usr/lib/python3/dist-packages/numpy/core/numeric.py"));
  EXPECT_TRUE(is_python_library_file("<frozen importlib._bootstrap>"));
  EXPECT_TRUE(is_python_library_file(""));
  EXPECT_FALSE(is_python_library_file("/home/me/train.py"));
  EXPECT_FALSE(is_python_library_file("train.py"));
  EXPECT_FALSE(is_python_library_file("/home/me/lib/python3.11-notes/run.py"));  // not a stdlib tree
  // Generated code is not the user's; text the user typed is.
  EXPECT_TRUE(is_python_library_file("<eval_with_key>.3"));
  EXPECT_TRUE(is_python_library_file("<template>"));
  for (const char* text :
       {"<string>", "<stdin>", "<console>", "<python-input-0>", "<ipython-input-3-5e2c0f1a>"}) {
    EXPECT_FALSE(is_python_library_file(text)) << text;
    EXPECT_TRUE(is_python_user_text(text)) << text;
  }
  EXPECT_FALSE(is_python_user_text("<frozen runpy>"));
  EXPECT_FALSE(is_python_user_text("/home/me/train.py"));
  EXPECT_FALSE(is_python_user_text("string"));
}

TEST(PythonFrames, TextTheUserGaveNamesASiteOnlyWithoutAFileOfTheirs) {
  // python -c "import torch; torch.ones(3).to('cuda')": the framework's Python, then <string>.
  std::vector<Frame> inline_code = {
      native("/usr/lib/libcudart.so.13", "cudaMemcpy"),
      py("/venv/lib/python3.12/site-packages/cupy/_creation/from_data.py", 88, "asarray"),
      py("<string>", 1, "<module>")};
  EXPECT_EQ(choose_user_frame(inline_code), 2u);
  EXPECT_EQ(choose_user_frame(inline_code, PythonFrames::All), 1u);
  // A dataclass's generated __init__ (<string>) between the user's file and the copy: the file.
  std::vector<Frame> generated = {
      native("/usr/lib/libcudart.so.13", "cudaMemcpy"),
      py("/venv/lib/python3.12/site-packages/cupy/_creation/from_data.py", 88, "asarray"),
      py("<string>", 3, "__init__"), py("/home/me/train.py", 42, "load_batch"),
      py("<string>", 1, "<module>")};
  EXPECT_EQ(choose_user_frame(generated), 3u);
  // A frozen module's frame is the interpreter's whatever else is there.
  std::vector<Frame> frozen = {native("/usr/lib/libcudart.so.13", "cudaMemcpy"),
                               py("<frozen runpy>", 88, "_run_code"), py("<stdin>", 2, "<module>")};
  EXPECT_EQ(choose_user_frame(frozen), 2u);
}

TEST(PythonFrames, TheSiteIsTheInnermostUserLine) {
  std::vector<Frame> stack = {native("/usr/lib/libcudart.so.13", "cudaMemcpy"),
                              native("/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so", "copy_kernel"),
                              py("/venv/lib/python3.12/site-packages/torch/_tensor.py", 100, "Tensor.to"),
                              py("/home/me/train.py", 42, "load_batch"),
                              py("/home/me/train.py", 90, "<module>")};
  EXPECT_EQ(choose_user_frame(stack), 3u);
  EXPECT_EQ(choose_user_frame(stack, PythonFrames::All), 2u);
  // Only library Python frames (a framework's own thread): the innermost of them.
  std::vector<Frame> lib = {native("/x/libtorch.so", "f"), py("/usr/lib/python3.11/threading.py", 1, "run")};
  EXPECT_EQ(choose_user_frame(lib), 1u);
  // No Python frame: the native rule.
  std::vector<Frame> plain = {native("/usr/lib/libcudart.so.13", "cudaMemcpy"), native("/home/me/app", "main")};
  EXPECT_EQ(choose_user_frame(plain), 1u);
}

// Names native addresses from a map; nothing else.
class FakeSymbolizer : public Symbolizer {
 public:
  std::map<uint64_t, std::string> names;
  Frame resolve(const std::vector<trace::ModuleInfo>&, uint64_t address) override {
    Frame f;
    f.address = address;
    f.module = "/bin/python3";
    f.function = names[address];
    return f;
  }
  std::vector<std::string> notes() const override { return {}; }
};

TEST(PythonFrames, AnInstalledPackageOfTheUsersNamesTheSite) {
  const std::vector<Frame> stack = {
      py("/venv/lib/python3.12/site-packages/torch/_tensor.py", 100, "Tensor.to"),
      py("/venv/lib/python3.12/site-packages/myproj/data.py", 42, "load_batch"),
      py("/venv/lib/python3.12/site-packages/myproj/train.py", 9, "main"),
      py("<frozen runpy>", 88, "_run_code")};
  // Without the rule: no user file, so the innermost Python frame, torch's.
  EXPECT_EQ(choose_user_frame(stack), 0u);
  const PythonFileTest user = [](std::string_view f) { return installed_top_level(f) == "myproj"; };
  EXPECT_EQ(choose_user_frame(stack, PythonFrames::User, {}, user), 1u);
  EXPECT_EQ(choose_user_frame(stack, PythonFrames::All, {}, user), 0u);
}

TEST(PythonFrames, MixedStackPutsEachGroupAtItsEvalLoop) {
  FakeSymbolizer sym;
  sym.names = {{1, "cudaMemcpy"}, {2, "_PyEval_EvalFrameDefault"}, {3, "PyObject_Call"},
               {4, "_PyEval_EvalFrameDefault"}, {5, "main"}};
  std::vector<trace::PyCode> codes(3);
  for (uint32_t i = 0; i < 3; ++i) {
    codes[i].id = i + 1;
    codes[i].version = 0x030b;
    codes[i].filename = "s.py";
    codes[i].qualname = "f" + std::to_string(i + 1);
  }
  const PyCodeIndex index = index_py_codes(codes);
  // Eval call #1 ran f1 and f2 (f2 its entry); eval call #2 ran f3.
  std::vector<uint64_t> frames = {1, 2, 3, 4, 5,
                                  trace::encode_python_frame(1, 10, false), trace::encode_python_frame(2, 20, true),
                                  trace::encode_python_frame(3, 30, true)};
  auto out = mixed_stack(frames, {}, index, sym);
  std::vector<std::string> names;
  for (const auto& f : out) names.push_back(f.function);
  EXPECT_EQ(names, (std::vector<std::string>{"cudaMemcpy", "f1", "f2", "PyObject_Call", "f3", "main"}));
  EXPECT_TRUE(out[1].python);
  EXPECT_EQ(out[1].offset, 10u);
  // Native frames cut short before any eval loop: the Python frames follow them.
  auto cut = mixed_stack({1, trace::encode_python_frame(1, 0, true), trace::encode_python_frame(9, 0, true)}, {},
                         index, sym);
  ASSERT_EQ(cut.size(), 3u);
  EXPECT_EQ(cut[1].function, "f1");
  EXPECT_TRUE(cut[2].python);  // a code id the trace does not name
  EXPECT_EQ(cut[2].display(), "<unknown>");
}

TEST(PythonFrames, Encoding) {
  const uint64_t v = trace::encode_python_frame(123456, 0xfffffffe, true);
  EXPECT_TRUE(trace::is_python_frame(v));
  EXPECT_FALSE(trace::is_python_frame(0x7fff12345678ull));
  const auto p = trace::decode_python_frame(v);
  EXPECT_EQ(p.code_id, 123456u);
  EXPECT_EQ(p.offset, 0xfffffffeu);
  EXPECT_TRUE(p.entry);
}


// pip install --target DIR (PyCUDA on the GPU machine: /tmp/site/pycuda/...):
// no site-packages in the path, but DIR/pycuda-2026.1.dist-info beside it.
TEST(PythonFrames, PackagesInstalledOutsideSitePackages) {
  int listed = 0;
  InstalledPackages installed([&](const std::string& dir) {
    ++listed;
    if (dir == "/tmp/site") return std::set<std::string>{"pycuda", "yaml", "six"};
    return std::set<std::string>{};
  });
  EXPECT_TRUE(installed.contains("/tmp/site/pycuda/gpuarray.py"));
  EXPECT_TRUE(installed.contains("/tmp/site/pycuda/compyte/array.py"));
  EXPECT_TRUE(installed.contains("/tmp/site/six.py"));       // a single-module distribution
  EXPECT_FALSE(installed.contains("/tmp/site/train.py"));    // the user's script beside them
  EXPECT_FALSE(installed.contains("/tmp/sitex/pycuda/a.py"));
  EXPECT_FALSE(installed.contains("/home/me/pycuda_workload.py"));
  EXPECT_FALSE(installed.contains("<frozen importlib._bootstrap>"));
  EXPECT_FALSE(installed.contains("relative/pycuda/a.py"));
  const int after = listed;
  EXPECT_TRUE(installed.contains("/tmp/site/pycuda/driver.py"));
  EXPECT_EQ(listed, after);  // each directory listed once

  std::vector<Frame> stack = {native("/tmp/site/pycuda/_driver.so", "py_memcpy_htod"),
                              py("/tmp/site/pycuda/gpuarray.py", 1573, "_memcpy_discontig"),
                              py("/home/me/work.py", 12, "upload")};
  const PythonFileTest test = [&](std::string_view f) { return installed.contains(f); };
  EXPECT_EQ(choose_user_frame(stack), 1u);  // the path rule alone cannot tell
  EXPECT_EQ(choose_user_frame(stack, PythonFrames::User, test), 2u);
  EXPECT_EQ(choose_user_frame(stack, PythonFrames::All, test), 1u);
}

// The listing rule on a real directory: dist-info and egg-info names
// (normalised as pip does) and top_level.txt's import names.
TEST(PythonFrames, InstalledPackagesListing) {
  char tmpl[] = "/tmp/cuxfer-pkgs-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(mkdir((dir + "/pycuda-2026.1.dist-info").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir + "/PyYAML-6.0.dist-info").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir + "/Old.Pkg-1.0-py3.11.egg-info").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir + "/pycuda").c_str(), 0700), 0);
  { std::ofstream(dir + "/PyYAML-6.0.dist-info/top_level.txt") << "_yaml\nyaml\n"; }
  const std::set<std::string> names = InstalledPackages::list_directory(dir);
  EXPECT_EQ(names, (std::set<std::string>{"pycuda", "pyyaml", "_yaml", "yaml", "old_pkg"}));
  InstalledPackages installed;
  EXPECT_TRUE(installed.contains(dir + "/pycuda/gpuarray.py"));
  EXPECT_TRUE(installed.contains(dir + "/yaml/__init__.py"));
  EXPECT_FALSE(installed.contains(dir + "/train.py"));
  EXPECT_TRUE(InstalledPackages::list_directory(dir + "/missing").empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cuxfer::symbolize
