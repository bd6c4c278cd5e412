// Python packages installed outside site-packages: `pip install --target DIR`
// trees put on PYTHONPATH, wheels unpacked beside an application. pip leaves
// DIR/<name>-<version>.dist-info next to DIR/<name>/, so a file under such a
// package is a framework's code, not the user's, although its path names no
// site-packages (PyCUDA from --target: /tmp/site/pycuda/gpuarray.py).
//
// Looked up on the analysing machine's file system, which is the recording
// one in practice; where the tree is not there, nothing is found and the
// path rule of frame_filter.h alone applies. Each directory is listed once.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>

namespace cuxfer::symbolize {

class InstalledPackages {
 public:
  // The import names installed in a directory (its *.dist-info and
  // *.egg-info entries: their names, and the lines of their top_level.txt).
  using Lister = std::function<std::set<std::string>(const std::string& dir)>;
  InstalledPackages();  // lists the real file system
  explicit InstalledPackages(Lister lister) : lister_(std::move(lister)) {}

  // True when some ancestor directory D of `file` has the top-level package
  // (or single module) that holds it installed: /D/<name>/... or /D/<name>.py.
  bool contains(std::string_view file);

  // The directory listing rule, exposed for tests: import names from the
  // metadata entries of `dir`.
  static std::set<std::string> list_directory(const std::string& dir);

 private:
  const std::set<std::string>& names_in(const std::string& dir);
  Lister lister_;
  std::unordered_map<std::string, std::set<std::string>> cache_;
};

}  // namespace cuxfer::symbolize
