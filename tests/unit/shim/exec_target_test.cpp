// interpose/exec_hooks.h: which exec can start a program (the trace is
// finished only before those).
#include "interpose/exec_hooks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using cuxfer::shim::exec_would_start;

namespace {

std::vector<std::string> g_asked;
const char* g_runnable = "";  // the one path that can run

bool fake_runnable(const char* path) {
  g_asked.emplace_back(path);
  return std::strcmp(path, g_runnable) == 0;
}

bool would(const char* file, bool search, const char* path_env, size_t buf_size = 256) {
  g_asked.clear();
  char buf[256];
  return exec_would_start(file, search, path_env, fake_runnable, buf, buf_size);
}

}  // namespace

TEST(ExecTarget, APathIsCheckedAsItIs) {
  g_runnable = "/usr/bin/python3";
  EXPECT_TRUE(would("/usr/bin/python3", false, nullptr));
  EXPECT_FALSE(would("/usr/bin/python4", false, nullptr));
  EXPECT_EQ(g_asked, std::vector<std::string>{"/usr/bin/python4"});
  // A name with a slash is not searched for, even by the PATH variants.
  EXPECT_FALSE(would("bin/python3", true, "/usr"));
  EXPECT_EQ(g_asked, std::vector<std::string>{"bin/python3"});
  EXPECT_FALSE(would("", true, "/usr/bin"));  // nothing to run
  EXPECT_TRUE(g_asked.empty());
}

TEST(ExecTarget, ThePathVariantsTryEachDirectoryInTurn) {
  g_runnable = "/opt/py/bin/python3";
  EXPECT_TRUE(would("python3", true, "/nonexistent/a:/nonexistent/b:/opt/py/bin:/usr/bin"));
  EXPECT_EQ(g_asked, (std::vector<std::string>{"/nonexistent/a/python3", "/nonexistent/b/python3",
                                               "/opt/py/bin/python3"}));
  EXPECT_FALSE(would("python3", true, "/nonexistent/a:/usr/bin"));
  EXPECT_EQ(g_asked.size(), 2u);
}

TEST(ExecTarget, AnEmptyEntryIsTheCurrentDirectoryAndNoPathIsGlibcsDefault) {
  g_runnable = "tool";
  EXPECT_TRUE(would("tool", true, "/nonexistent::/usr/bin"));
  EXPECT_EQ(g_asked, (std::vector<std::string>{"/nonexistent/tool", "tool"}));
  g_runnable = "/usr/bin/tool";
  EXPECT_TRUE(would("tool", true, nullptr));
  EXPECT_EQ(g_asked, (std::vector<std::string>{"/bin/tool", "/usr/bin/tool"}));
}

TEST(ExecTarget, ACandidateLongerThanTheBufferIsSkippedNotCut) {
  g_runnable = "/b/tool";
  const std::string long_dir(300, 'x');
  EXPECT_TRUE(would("tool", true, ("/" + long_dir + ":/b").c_str()));
  EXPECT_EQ(g_asked, std::vector<std::string>{"/b/tool"});
  EXPECT_FALSE(would("tool", true, "/b", 7));  // "/b/tool" and its NUL need 8
  EXPECT_TRUE(g_asked.empty());
}
