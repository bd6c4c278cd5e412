// The installed package a Python process was started from (analyzer/symbolize/entry_package.h).
#include "analyzer/symbolize/entry_package.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "analyzer/symbolize/frame_filter.h"  // installed_top_level

namespace cuxfer::symbolize {
namespace {

using Argv = std::vector<std::string>;

const char* kPipStub =
    "#!/venv/bin/python3\n"
    "# -*- coding: utf-8 -*-\n"
    "import re\n"
    "import sys\n"
    "from myproj.cli.train import main\n"
    "if __name__ == \"__main__\":\n"
    "    sys.argv[0] = re.sub(r\"(-script\\.pyw|\\.exe)?$\", \"\", sys.argv[0])\n"
    "    sys.exit(main())\n";

TEST(EntryPackage, PythonPrograms) {
  EXPECT_TRUE(is_python_program("/usr/bin/python3.12", {}));
  EXPECT_TRUE(is_python_program("/x/unknown", {"python"}));
  EXPECT_TRUE(is_python_program("/opt/py/bin/python3.13t", {"x"}));
  EXPECT_FALSE(is_python_program("/usr/bin/bandwidthTest", {"./bandwidthTest", "-m", "x"}));
  EXPECT_FALSE(is_python_program("/usr/bin/pythonic", {"pythonic"}));
}

TEST(EntryPackage, ModuleOption) {
  EXPECT_EQ(module_option({"python3", "-m", "myproj.train", "--lr", "3"}), "myproj.train");
  EXPECT_EQ(module_option({"python3", "-u", "-X", "faulthandler", "-W", "ignore", "-m", "myproj"}), "myproj");
  EXPECT_EQ(module_option({"python3", "-mmyproj.train"}), "myproj.train");
  EXPECT_EQ(module_option({"python3", "-uBmmyproj"}), "myproj");
  EXPECT_EQ(module_option({"python3", "train.py", "-m", "x"}), "");  // the script's own -m
  EXPECT_EQ(module_option({"python3", "-c", "import x", "-m", "y"}), "");
  EXPECT_EQ(module_option({"python3", "-m"}), "");
  EXPECT_EQ(script_argument({"python3", "-u", "/venv/bin/myproj-train", "--x"}), "/venv/bin/myproj-train");
  EXPECT_EQ(script_argument({"python3", "-W", "ignore", "train.py"}), "train.py");
  EXPECT_EQ(script_argument({"python3", "-Wignore", "train.py"}), "train.py");
  EXPECT_EQ(script_argument({"python3", "-", "a"}), "");
  EXPECT_EQ(script_argument({"python3", "-m", "a"}), "");
  EXPECT_EQ(script_argument({"python3"}), "");
}

TEST(EntryPackage, ConsoleScriptStubs) {
  EXPECT_EQ(stub_package(kPipStub), "myproj");
  // Not stubs: no shebang, a program that merely imports, a different exit, too long.
  EXPECT_EQ(stub_package(std::string(kPipStub).substr(20)), "");
  EXPECT_EQ(stub_package("#!/usr/bin/env python3\nfrom torch import ones\nx = ones(3)\n"), "");
  EXPECT_EQ(
      stub_package("#!/usr/bin/env python3\nfrom a import main\nfrom b import main\nsys.exit(main())\n"), "");
  std::string longer = kPipStub;
  for (int i = 0; i < 20; ++i) longer += "x = 1\n";
  EXPECT_EQ(stub_package(longer), "");
  EXPECT_EQ(stub_package("#!/bin/sh\nfrom a import main\nsys.exit(main())\n"), "");
}

TEST(EntryPackage, FromArgv) {
  std::map<std::string, std::string> files = {{"/venv/bin/myproj-train", kPipStub},
                                              {"/home/me/train.py", "import torch\n"}};
  const SmallFileReader read = [&](const std::string& path, size_t) -> std::optional<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return std::nullopt;
    return it->second;
  };
  EntryPackage m = entry_package("/usr/bin/python3.12", {"python3", "-m", "myproj.train"}, read);
  EXPECT_EQ(m.package, "myproj");
  EXPECT_EQ(m.how, "python -m myproj.train");
  EntryPackage s = entry_package("/venv/bin/python3", {"/venv/bin/python3", "/venv/bin/myproj-train"}, read);
  EXPECT_EQ(s.package, "myproj");
  EXPECT_EQ(s.how, "the console script /venv/bin/myproj-train");
  EXPECT_EQ(entry_package("/usr/bin/python3", {"python3", "/home/me/train.py"}, read).package, "");
  EXPECT_EQ(entry_package("/usr/bin/python3", {"python3", "/missing"}, read).package, "");
  EXPECT_EQ(entry_package("/bin/app", {"/bin/app", "-m", "x"}, read).package, "");
}

TEST(EntryPackage, InstalledTopLevel) {
  EXPECT_EQ(installed_top_level("/venv/lib/python3.12/site-packages/torch/cuda/__init__.py"), "torch");
  EXPECT_EQ(installed_top_level("/usr/lib/python3/dist-packages/six.py"), "six");
  EXPECT_EQ(installed_top_level("/a/site-packages/x/site-packages/inner/m.py"), "inner");
  EXPECT_EQ(installed_top_level("/home/me/train.py"), "");
}

}  // namespace
}  // namespace cuxfer::symbolize
