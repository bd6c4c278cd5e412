#include "record/cupti_locate.h"

#include <gtest/gtest.h>

namespace cuxfer::shim {
namespace {

std::vector<std::string> paths(const std::vector<CuptiCandidate>& c) {
  std::vector<std::string> out;
  for (const auto& x : c) out.push_back(x.path);
  return out;
}

TEST(CuptiLocate, AnOverrideIsTheOnlyCandidate) {
  CuptiSearch s;
  s.override_path = "/opt/x/libcupti.so.13";
  s.loaded = {"/usr/local/cuda/lib64/libcudart.so.13"};
  s.toolkit_roots = {"/usr/local/cuda"};
  auto c = cupti_candidates(s);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].path, "/opt/x/libcupti.so.13");
  EXPECT_EQ(c[0].why, "CUXFER_CUPTI_LIB");
}

// PyTorch from pip on a machine with only the driver: the runtime comes from
// the nvidia wheels, and so must CUPTI, before anything else.
TEST(CuptiLocate, BesideThePipRuntimeFirst) {
  CuptiSearch s;
  s.loaded = {"/usr/bin/python3.12", "/v/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so",
              "/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13"};
  s.toolkit_roots = {"", "", "/usr/local/cuda"};
  auto c = cupti_candidates(s);
  ASSERT_GE(c.size(), 3u);
  EXPECT_EQ(c[0].path, "/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13");
  EXPECT_EQ(c[0].why, "beside the loaded /v/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13");
  // The same folder again through the nvidia root is not repeated.
  EXPECT_EQ(c[1].path, "/v/lib/python3.12/site-packages/nvidia/cuda_cupti/lib/libcupti.so.13");
  EXPECT_EQ(c[2].path, "libcupti.so.13");
  EXPECT_EQ(paths(c).back(), "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13");
}

// CuPy and JAX reach the driver without cudart: any library of the nvidia
// wheels leads to their folders.
TEST(CuptiLocate, NvidiaWheelsOfAnyLoadedLibrary) {
  CuptiSearch s;
  s.loaded = {"/s/nvidia/cublas/lib/libcublas.so.13"};
  auto c = paths(cupti_candidates(s));
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[0], "/s/nvidia/cu13/lib/libcupti.so.13");
  EXPECT_EQ(c[1], "/s/nvidia/cuda_cupti/lib/libcupti.so.13");
}

TEST(CuptiLocate, SearchPathThenLinkerThenToolkits) {
  CuptiSearch s;
  s.search_path = "/a/nvidia/cu13/lib::/b";
  s.toolkit_roots = {"/opt/cuda-13.0", "", "/usr/local/cuda"};
  auto c = paths(cupti_candidates(s));
  std::vector<std::string> want = {"/a/nvidia/cu13/lib/libcupti.so.13",
                                   "/b/libcupti.so.13",
                                   "libcupti.so.13",
                                   "/opt/cuda-13.0/extras/CUPTI/lib64/libcupti.so.13",
                                   "/opt/cuda-13.0/lib64/libcupti.so.13",
                                   "/opt/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13",
                                   "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                                   "/usr/local/cuda/lib64/libcupti.so.13",
                                   "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13"};
  EXPECT_EQ(c, want);
}

TEST(CuptiLocate, ToolkitRuntimeAndToolkitRootAreOneCandidate) {
  CuptiSearch s;
  s.loaded = {"/usr/local/cuda/lib64/libcudart.so.13"};
  s.toolkit_roots = {"/usr/local/cuda"};
  auto c = cupti_candidates(s);
  int n = 0;
  for (const auto& x : c) n += x.path == "/usr/local/cuda/lib64/libcupti.so.13";
  EXPECT_EQ(n, 1);
  EXPECT_EQ(c[0].why, "beside the loaded /usr/local/cuda/lib64/libcudart.so.13");
}

}  // namespace
}  // namespace cuxfer::shim
