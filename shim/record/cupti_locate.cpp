#include "record/cupti_locate.h"

#include <algorithm>
#include <string_view>

namespace cuxfer::shim {
namespace {

constexpr std::string_view kCupti = "libcupti.so.13";

std::string_view dir_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

std::string_view base_of(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// ".../site-packages/nvidia" for a path inside an nvidia wheel's folder
// (nvidia/cu13/lib/x.so, nvidia/cuda_runtime/lib/x.so), else "".
std::string_view nvidia_root(std::string_view path) {
  size_t at = path.rfind("/nvidia/");
  if (at == std::string_view::npos) return {};
  return path.substr(0, at + std::string_view("/nvidia").size());
}

class List {
 public:
  void add(std::string path, std::string why) {
    if (path.empty()) return;
    auto same = [&](const CuptiCandidate& c) { return c.path == path; };
    if (std::find_if(out_.begin(), out_.end(), same) == out_.end()) out_.push_back({std::move(path), std::move(why)});
  }
  std::vector<CuptiCandidate> take() { return std::move(out_); }

 private:
  std::vector<CuptiCandidate> out_;
};

std::string in(std::string_view dir) { return std::string(dir) + "/" + std::string(kCupti); }

}  // namespace

std::vector<CuptiCandidate> cupti_candidates(const CuptiSearch& s) {
  List list;
  if (!s.override_path.empty()) {
    // An explicit path that fails is not silently replaced by another.
    list.add(s.override_path, "CUXFER_CUPTI_LIB");
    return list.take();
  }
  // 1. Beside the CUDA runtime the process loaded: the toolkit's lib64, a
  //    pip wheel's nvidia/cu13/lib, a framework's own lib folder.
  for (const auto& p : s.loaded)
    if (base_of(p).rfind("libcudart.so", 0) == 0 && !dir_of(p).empty())
      list.add(in(dir_of(p)), "beside the loaded " + p);
  // 2. The nvidia wheels any loaded library came from (a process that reached
  //    the driver without cudart, as CuPy and JAX do): CUDA 13 wheels share
  //    nvidia/cu13/lib; older layouts give CUPTI a folder of its own.
  for (const auto& p : s.loaded) {
    std::string_view root = nvidia_root(p);
    if (root.empty()) continue;
    const std::string why = "in the nvidia pip packages beside " + p;
    list.add(in(std::string(root) + "/cu13/lib"), why);
    list.add(in(std::string(root) + "/cuda_cupti/lib"), why);
  }
  // 3. The folders the Python launcher found on its sys.path (python -m
  //    cuxfer, the `cuxfer` console script): the nvidia-cuda-cupti wheel.
  std::string_view rest = s.search_path;
  while (!rest.empty()) {
    size_t colon = rest.find(':');
    std::string_view dir = rest.substr(0, colon);
    if (!dir.empty()) list.add(in(dir), "CUXFER_CUPTI_SEARCH_PATH");
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
  }
  // 4. The dynamic linker's own search: LD_LIBRARY_PATH, the ld.so cache.
  list.add(std::string(kCupti), "the dynamic linker's search path");
  // 5. The toolkit.
  for (const auto& root : s.toolkit_roots) {
    if (root.empty()) continue;
    const std::string why = "the CUDA toolkit at " + root;
    list.add(in(root + "/extras/CUPTI/lib64"), why);
    list.add(in(root + "/lib64"), why);
    list.add(in(root + "/targets/x86_64-linux/lib"), why);
  }
  return list.take();
}

}  // namespace cuxfer::shim
