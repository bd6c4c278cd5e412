// The launcher's pieces that can be tested without running a program.
#include <gtest/gtest.h>

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "analyzer/cli/options.h"
#include "analyzer/launcher/manifest.h"
#include "analyzer/launcher/program_check.h"
#include "analyzer/cli/record_command.h"
#include "analyzer/launcher/shim_path.h"

namespace cuxfer::launcher {
namespace {

TEST(Manifest, ParsesLinesAndSkipsTornOnes) {
  auto entries = parse_manifest("123 /tmp/a.trace\n456 /tmp/dir with space/b.trace\nxx\n0 /z\n789 /tmp/c");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].pid, 123u);
  EXPECT_EQ(entries[0].trace_path, "/tmp/a.trace");
  EXPECT_EQ(entries[1].trace_path, "/tmp/dir with space/b.trace");
}

TEST(Manifest, CreatesAndRemovesItsPrivateDirectory) {
  std::string error, dir;
  {
    auto m = Manifest::create(&error);
    ASSERT_TRUE(m) << error;
    dir = std::filesystem::path(m->path()).parent_path();
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::ofstream(m->path(), std::ios::app) << "42 /x/y.trace\n";
    auto entries = m->read();
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].pid, 42u);
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(Preload, PrependsKeepsAndDoesNotDuplicate) {
  EXPECT_EQ(prepend_preload("/l/libcuxfer.so", nullptr), "/l/libcuxfer.so");
  EXPECT_EQ(prepend_preload("/l/libcuxfer.so", ""), "/l/libcuxfer.so");
  EXPECT_EQ(prepend_preload("/l/libcuxfer.so", "/x/a.so /x/b.so"), "/l/libcuxfer.so:/x/a.so /x/b.so");
  EXPECT_EQ(prepend_preload("/l/libcuxfer.so", "/x/a.so:/l/libcuxfer.so"), "/x/a.so:/l/libcuxfer.so");
}

// GCC's ASan runtime in front of the shim: its __tls_get_addr bookkeeping is
// turned off (GCC 12's LeakSanitizer crashed at exit beside the shim), keeping
// the user's options, and never overriding a choice the user made.
TEST(Preload, AsanOptionsTurnOffTlsGetAddrInterceptionOnlyForGccAsanFirst) {
  EXPECT_EQ(asan_options_for("/usr/lib/gcc/x86_64-linux-gnu/12/libasan.so:/l/libcuxfer.so", nullptr),
            "intercept_tls_get_addr=0");
  EXPECT_EQ(asan_options_for("libasan.so.8:/l/libcuxfer.so", "detect_leaks=1"), "detect_leaks=1:intercept_tls_get_addr=0");
  EXPECT_EQ(asan_options_for("libasan.so.8:/l/libcuxfer.so", "intercept_tls_get_addr=1"), "");
  EXPECT_EQ(asan_options_for("/l/libcuxfer.so:/x/libasan.so.8", nullptr), "");  // not first: not this program's
  EXPECT_EQ(asan_options_for("/l/libcuxfer.so", "detect_leaks=1"), "");
  EXPECT_EQ(asan_options_for("/x/libtsan.so.2:/l/libcuxfer.so", nullptr), "");
  EXPECT_EQ(asan_options_for("", nullptr), "");
}

// AddressSanitizer aborts unless its runtime is the first library loaded: the
// sanitizer runtimes leading LD_PRELOAD stay in front of the shim, and the
// runtime a program needs in first place is put there when the list lacks it.
TEST(Preload, SanitizerRuntimesStayFirst) {
  const std::string shim = "/l/libcuxfer.so";
  EXPECT_EQ(prepend_preload(shim, "/usr/lib/libasan.so.8"), "/usr/lib/libasan.so.8:/l/libcuxfer.so");
  EXPECT_EQ(prepend_preload(shim, "libasan.so.8 /x/a.so"), "libasan.so.8:/l/libcuxfer.so:/x/a.so");
  EXPECT_EQ(prepend_preload(shim, "/r/libclang_rt.asan-x86_64.so:/r/libtsan.so.2:/x/a.so"),
            "/r/libclang_rt.asan-x86_64.so:/r/libtsan.so.2:/l/libcuxfer.so:/x/a.so");
  // Not at the front: where the user put it (ASan would refuse that order without cuxfer too).
  EXPECT_EQ(prepend_preload(shim, "/x/a.so:/usr/lib/libasan.so.8"), "/l/libcuxfer.so:/x/a.so:/usr/lib/libasan.so.8");
  EXPECT_EQ(prepend_preload(shim, nullptr, "libasan.so.8"), "libasan.so.8:/l/libcuxfer.so");
  EXPECT_EQ(prepend_preload(shim, "/x/a.so", "libasan.so.8"), "libasan.so.8:/l/libcuxfer.so:/x/a.so");
  EXPECT_EQ(prepend_preload(shim, "/usr/lib/x86_64-linux-gnu/libasan.so.8:/x/a.so", "libasan.so.8"),
            "/usr/lib/x86_64-linux-gnu/libasan.so.8:/l/libcuxfer.so:/x/a.so");
  EXPECT_EQ(prepend_preload(shim, "/x/a.so:/l/libcuxfer.so", "libasan.so.8"), "libasan.so.8:/x/a.so:/l/libcuxfer.so");
  EXPECT_TRUE(is_sanitizer_runtime("/usr/lib/gcc/x86_64-linux-gnu/12/libasan.so"));
  EXPECT_TRUE(is_sanitizer_runtime("libubsan.so.1"));
  EXPECT_FALSE(is_sanitizer_runtime("/x/libasanitizer_helper.so"));
  EXPECT_FALSE(is_sanitizer_runtime("/l/libcuxfer.so"));
}

TEST(Preload, RuntimeNeedingFirstPlace) {
  EXPECT_EQ(runtime_needing_first_place({"libasan.so.8", "libcudart.so.13", "libc.so.6"}), "libasan.so.8");
  EXPECT_EQ(runtime_needing_first_place({"libc.so.6", "libclang_rt.hwasan-aarch64.so"}), "libclang_rt.hwasan-aarch64.so");
  EXPECT_EQ(runtime_needing_first_place({"libtsan.so.2", "libc.so.6"}), "");  // TSan has no such check
  EXPECT_EQ(runtime_needing_first_place({}), "");
}

class ProgramCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cuxfer-launcher-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes, mode_t mode) {
    std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    ::chmod(p.c_str(), mode);
    return p;
  }
  // A minimal ELF64 executable header with one program header of `type`.
  static std::string elf_with(uint32_t type) {
    Elf64_Ehdr eh{};
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_type = ET_EXEC;
    eh.e_phoff = sizeof eh;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 1;
    Elf64_Phdr ph{};
    ph.p_type = type;
    std::string s(reinterpret_cast<char*>(&eh), sizeof eh);
    s.append(reinterpret_cast<char*>(&ph), sizeof ph);
    return s;
  }
  std::filesystem::path dir_;
};

TEST_F(ProgramCheck, ResolvesLikeAShell) {
  std::string exe = write("tool", "#!/bin/sh\n", 0755);
  write("data", "x", 0644);
  std::string path_env = "/nonexistent:" + dir_.string();
  auto r = resolve_program("tool", path_env.c_str());
  EXPECT_EQ(r.result, ResolvedProgram::Result::Found);
  EXPECT_EQ(r.path, exe);
  EXPECT_EQ(resolve_program("data", path_env.c_str()).result, ResolvedProgram::Result::NotExecutable);
  EXPECT_EQ(resolve_program("nope", path_env.c_str()).result, ResolvedProgram::Result::NotFound);
  EXPECT_EQ(resolve_program(exe, "").result, ResolvedProgram::Result::Found);
  EXPECT_EQ(resolve_program("sh", nullptr).result, ResolvedProgram::Result::Found);
}

// The programs a command line may run, as the traces will name them.
TEST_F(ProgramCheck, ProgramsNamedByACommandLine) {
  write("tool-1.2", "#!/bin/sh\n", 0755);
  std::filesystem::create_symlink("tool-1.2", dir_ / "tool");
  write("job", "#!/usr/bin/env -S FOO=1 tool --flag\n", 0755);
  write("direct", "#!" + (dir_ / "tool").string() + " -x\n", 0755);
  const std::string path_env = dir_.string() + ":/usr/bin:/bin";
  auto has = [](const std::vector<std::string>& names, const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  auto names = programs_named({"tool"}, path_env.c_str());
  EXPECT_TRUE(has(names, "tool"));
  EXPECT_TRUE(has(names, "tool-1.2"));                  // its real path
  names = programs_named({"./job"}, path_env.c_str());  // not in the current directory: its name only
  EXPECT_TRUE(has(names, "job"));
  EXPECT_FALSE(has(names, "tool-1.2"));
  names = programs_named({(dir_ / "job").string()}, path_env.c_str());
  EXPECT_TRUE(has(names, "job"));
  EXPECT_TRUE(has(names, "tool-1.2"));  // #!/usr/bin/env ... tool
  names = programs_named({(dir_ / "direct").string()}, path_env.c_str());
  EXPECT_TRUE(has(names, "tool-1.2"));  // #!DIR/tool
  names = programs_named({"mpirun", "-n", "2", "./train", "--steps=3"}, path_env.c_str());
  EXPECT_TRUE(has(names, "train"));
  EXPECT_FALSE(has(names, "tool-1.2"));
}

TEST_F(ProgramCheck, ReadsTheLibrariesAProgramNeeds) {
  const auto self = needed_libraries("/proc/self/exe");
  EXPECT_NE(std::find(self.begin(), self.end(), "libc.so.6"), self.end()) << ::testing::PrintToString(self);
  EXPECT_TRUE(needed_libraries(write("script", "#!/bin/sh\necho hi\n", 0755)).empty());
  EXPECT_TRUE(needed_libraries(write("static", elf_with(PT_LOAD), 0755)).empty());
  EXPECT_TRUE(needed_libraries((dir_ / "missing").string()).empty());
}

TEST_F(ProgramCheck, StaticExecutablesAreRefused) {
  PreloadCheck s = check_preloadable(write("static", elf_with(PT_LOAD), 0755));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("statically linked"), std::string::npos);
  EXPECT_TRUE(check_preloadable(write("dynamic", elf_with(PT_INTERP), 0755)).ok);
  EXPECT_TRUE(check_preloadable(write("script", "#!/bin/sh\necho hi\n", 0755)).ok);
  EXPECT_TRUE(check_preloadable("/proc/self/exe").ok);
}

TEST_F(ProgramCheck, SetIdExecutablesAreRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a file set-uid to another user";
  std::string p = write("suid", elf_with(PT_INTERP), 0755);
  ASSERT_EQ(::chown(p.c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod(p.c_str(), 04755), 0);
  PreloadCheck c = check_preloadable(p);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.reason.find("setuid"), std::string::npos);
  ASSERT_EQ(::chmod(p.c_str(), 02755), 0);
  EXPECT_NE(check_preloadable(p).reason.find("setgid"), std::string::npos);
}

TEST(ArgReader, LongShortAndEquals) {
  cli::ArgReader in("cuxfer x", {"--top", "5", "--top=6", "-oFILE", "-o", "F2", "--json", "pos", "--"});
  std::string v;
  ASSERT_TRUE(in.option("top", 0, v));
  EXPECT_EQ(v, "5");
  ASSERT_TRUE(in.option("top", 0, v));
  EXPECT_EQ(v, "6");
  ASSERT_TRUE(in.option("output", 'o', v));
  EXPECT_EQ(v, "FILE");
  ASSERT_TRUE(in.option("output", 'o', v));
  EXPECT_EQ(v, "F2");
  EXPECT_FALSE(in.flag("jsonx"));
  EXPECT_TRUE(in.flag("json"));
  EXPECT_FALSE(in.at_option());
  EXPECT_EQ(in.take(), "pos");
  EXPECT_TRUE(in.end_of_options());
  EXPECT_TRUE(in.done());

  cli::ArgReader missing("cuxfer x", {"--top"});
  EXPECT_FALSE(missing.option("top", 0, v));
  EXPECT_EQ(missing.error(), "cuxfer x: option --top needs a value");

  uint64_t n = 0;
  EXPECT_TRUE(cli::parse_unsigned("16", n));
  EXPECT_EQ(n, 16u);
  EXPECT_FALSE(cli::parse_unsigned("-1", n));
  EXPECT_FALSE(cli::parse_unsigned("3x", n));
  EXPECT_FALSE(cli::parse_unsigned("99999999999999999999999", n));
}

TEST(ArgReader, PositionalsAndEverythingAfterDashes) {
  cli::ArgReader in("cuxfer x", {"a.trace", "--json", "-", "--", "--not-an-option", "b"});
  std::vector<std::string> paths;
  EXPECT_TRUE(in.take_positional(paths));
  EXPECT_FALSE(in.take_positional(paths));  // at an option: left to the caller
  EXPECT_TRUE(in.flag("json"));
  EXPECT_TRUE(in.take_positional(paths));   // "-" (stdin) is positional
  EXPECT_TRUE(in.take_positional(paths));   // "--" and the rest
  EXPECT_TRUE(in.done());
  EXPECT_FALSE(in.take_positional(paths));
  EXPECT_EQ(paths, (std::vector<std::string>{"a.trace", "-", "--not-an-option", "b"}));
}

// The commands' one option loop (cli::OptionTable): each kind of operand,
// --help, a refused value, a missing value, an unknown option.
TEST(OptionTable, OperandsHelpAndErrors) {
  bool json = false;
  std::string out;
  uint64_t top = 0;
  auto table = [&](cli::Positionals p) {
    cli::OptionTable t("HELP\n", p);
    t.flag("json", 0, [&] { json = true; })
        .value("output", 'o', [&](const std::string& v, cli::ArgReader&) { out = v; })
        .value("top", 0, [&](const std::string& v, cli::ArgReader& r) {
          if (!cli::parse_unsigned(v, top)) r.fail("--top needs a count, got '" + v + "'");
        });
    return t;
  };
  {  // Collect: operands anywhere, everything after "--".
    cli::ArgReader in("cuxfer x", {"a", "--json", "-oF", "b", "--", "--top"});
    std::vector<std::string> operands;
    EXPECT_EQ(table(cli::Positionals::Collect).read(in, &operands), std::nullopt);
    EXPECT_TRUE(json);
    EXPECT_EQ(out, "F");
    EXPECT_EQ(operands, (std::vector<std::string>{"a", "b", "--top"}));
  }
  {  // Command: the first operand ends the options; the rest is the command line.
    cli::ArgReader in("cuxfer x", {"--top=3", "prog", "--json"});
    EXPECT_EQ(table(cli::Positionals::Command).read(in), std::nullopt);
    EXPECT_EQ(top, 3u);
    EXPECT_EQ(in.rest(), (std::vector<std::string>{"prog", "--json"}));
  }
  {  // Command after "--".
    cli::ArgReader in("cuxfer x", {"--", "--json"});
    EXPECT_EQ(table(cli::Positionals::Command).read(in), std::nullopt);
    EXPECT_EQ(in.rest(), (std::vector<std::string>{"--json"}));
  }
  testing::internal::CaptureStdout();
  {
    cli::ArgReader in("cuxfer x", {"--json", "-h", "--unknown"});
    EXPECT_EQ(table(cli::Positionals::Collect).read(in), 0);
  }
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "HELP\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> errors = {
      {{"--top", "x"}, "cuxfer x: --top needs a count, got 'x'"},
      {{"--top"}, "cuxfer x: option --top needs a value"},
      {{"--nope", "--json"}, "cuxfer x: unknown option '--nope' (try 'cuxfer x --help')"},
      {{"--json", "stray"}, "cuxfer x: unexpected argument 'stray'"},
  };
  for (const auto& [args, want] : errors) {
    cli::ArgReader in("cuxfer x", args);
    testing::internal::CaptureStderr();
    EXPECT_EQ(table(cli::Positionals::None).read(in), cli::kExitUsage) << want;
    EXPECT_EQ(testing::internal::GetCapturedStderr(), want + "\n");
  }
}

}  // namespace
}  // namespace cuxfer::launcher
