// The machine profile: format validation, interpolation and the staging cost model.
#include "analyzer/model/machine_profile.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace cuxfer::model {
namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

// Shaped like the H200 measurements (docs/benchmarks.md).
MachineProfile h200_like() {
  MachineProfile p;
  p.created = "2026-11-29T00:00:00Z";
  p.hostname = "gpuhost";
  p.gpu_name = "NVIDIA H200";
  p.gpu_uuid = "GPU-1234";
  p.cores = 16;
  for (int dir = 0; dir < 2; ++dir) {
    p.pinned[dir] = {{4, 0.0005}, {4 * KiB, 0.45}, {64 * KiB, 6}, {1 * MiB, 32}, {4 * MiB, 48}, {64 * MiB, 55}, {1024 * MiB, 55}};
    p.pageable[dir] = {{4, 0.0005}, {4 * KiB, 0.45}, {64 * KiB, 3}, {1 * MiB, 10}, {4 * MiB, 12}, {64 * MiB, 8}, {1024 * MiB, 8}};
  }
  p.registration = {{1 * MiB, 60, 40}, {1024 * MiB, 30000, 17000}};
  p.host_memcpy = {{1, 9}, {2, 17}, {4, 28}, {8, 34}, {16, 36}};
  return p;
}

TEST(MachineProfile, InterpolatesLogLogAndClamps) {
  MachineProfile p = h200_like();
  EXPECT_DOUBLE_EQ(p.pinned_gbps(0, 1 * MiB), 32);
  EXPECT_DOUBLE_EQ(p.pinned_gbps(0, 1), 0.0005);             // below the range: the first point
  EXPECT_DOUBLE_EQ(p.pinned_gbps(0, 8ull << 30), 55);         // above: the last
  const double mid = p.pinned_gbps(0, 2 * MiB);               // geometric between 32 and 48
  EXPECT_NEAR(mid, std::sqrt(32.0 * 48.0), 0.01);
  EXPECT_DOUBLE_EQ(p.memcpy_gbps(8), 34);
  EXPECT_DOUBLE_EQ(p.memcpy_gbps(6), 28);  // the nearest measured count below
  EXPECT_NEAR(p.registration_ns(1024 * MiB), 47e6, 1);
  EXPECT_NEAR(p.registration_ns(512 * KiB), 50e3, 1);
}

TEST(MachineProfile, StagingModelWinsOnlyWhereThePipelineHidesTheCopy) {
  MachineProfile p = h200_like();
  // 64 MiB: driver 8 GB/s; staging bounded by 34 GB/s memcpy, so ~4x faster.
  const double driver = 64.0 * MiB / 8;
  EXPECT_LT(p.staged_ns(0, 64 * MiB, 8), driver / 3);
  auto h2d = p.stage_min(0, 8);
  ASSERT_TRUE(h2d.has_value());
  EXPECT_GE(*h2d, 1 * MiB);
  EXPECT_LE(*h2d, 64 * MiB);
  // A machine whose pageable path is as fast as pinned never stages.
  MachineProfile fast = p;
  fast.pageable[1] = fast.pinned[1];
  EXPECT_FALSE(fast.stage_min(1, 8).has_value());
}

TEST(MachineProfile, RoundTripsThroughJson) {
  MachineProfile p = h200_like();
  MachineProfile q;
  std::string error;
  ASSERT_TRUE(parse_machine_profile(machine_profile_json(p), q, error)) << error;
  EXPECT_EQ(q.hostname, "gpuhost");
  EXPECT_EQ(q.gpu_uuid, "GPU-1234");
  EXPECT_EQ(q.pinned[1].size(), p.pinned[1].size());
  EXPECT_DOUBLE_EQ(q.pageable[0].back().gbps, 8);
  EXPECT_EQ(q.registration.size(), 2u);
  EXPECT_EQ(q.host_memcpy.back().threads, 16u);
}

TEST(MachineProfile, RejectsBadFilesWithOneLine) {
  MachineProfile q;
  std::string error;
  EXPECT_FALSE(parse_machine_profile("not json", q, error));
  EXPECT_EQ(error, "not a JSON object");
  EXPECT_FALSE(parse_machine_profile(R"({"schema":"cuxfer.machine/9"})", q, error));
  EXPECT_NE(error.find("expected cuxfer.machine/1"), std::string::npos);
  EXPECT_FALSE(parse_machine_profile(R"({"schema":"cuxfer.machine/1","host":{"hostname":"h"},"gpu":{},"copy":[]})", q, error));
  EXPECT_NE(error.find("no pinned copy curve"), std::string::npos);
  EXPECT_FALSE(parse_machine_profile(
      R"({"schema":"cuxfer.machine/1","host":{"hostname":"h"},"gpu":{},"copy":[{"dir":"H2D","memory":"pinned","bytes":4,"gbps":-1}]})",
      q, error));
  EXPECT_NE(error.find("bad bytes/gbps"), std::string::npos);
  EXPECT_FALSE(parse_machine_profile(R"({"schema":"cuxfer.machine/1","gpu":{},"copy":[]})", q, error));
  EXPECT_NE(error.find("missing or mistyped"), std::string::npos);
  EXPECT_FALSE(read_machine_profile("/nonexistent/profile.json", q, error));
  EXPECT_EQ(error, "cannot read /nonexistent/profile.json");
}

TEST(MachineProfile, FindsTheHostsProfileInTheProfileDirectory) {
  const auto dir = std::filesystem::temp_directory_path() / ("cuxfer-profiles-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  setenv("CUXFER_PROFILE_DIR", dir.c_str(), 1);
  MachineProfile p = h200_like();
  std::ofstream(dir / machine_profile_file_name(p.hostname, p.gpu_uuid)) << machine_profile_json(p);
  std::ofstream(dir / "gpuhost-broken.json") << "{";  // unreadable ones are skipped
  std::ofstream(dir / "otherhost-GPU-9.json") << machine_profile_json(p);
  auto found = find_machine_profile("gpuhost");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->gpu_uuid, "GPU-1234");
  EXPECT_FALSE(find_machine_profile("nohost").has_value());
  unsetenv("CUXFER_PROFILE_DIR");
  std::filesystem::remove_all(dir);
}

// Without HOME the profiles are never looked for (or written) in a shared
// directory such as /tmp, where another user could plant one: the user's home
// from the password database, else none at all.
TEST(MachineProfileDir, WithoutHomeNoSharedFallback) {
  std::string saved[3];
  const char* names[3] = {"HOME", "XDG_CACHE_HOME", "CUXFER_PROFILE_DIR"};
  bool had[3];
  for (int i = 0; i < 3; ++i) {
    const char* v = std::getenv(names[i]);
    had[i] = v != nullptr;
    if (v) saved[i] = v;
    unsetenv(names[i]);
  }
  const std::string dir = machine_profile_dir();
  for (int i = 0; i < 3; ++i)
    if (had[i]) setenv(names[i], saved[i].c_str(), 1);
  const passwd* pw = getpwuid(getuid());
  if (pw && pw->pw_dir && pw->pw_dir[0] == '/')
    EXPECT_EQ(dir, std::string(pw->pw_dir) + "/.cache/cuxfer/machines");
  else
    EXPECT_EQ(dir, "");
  EXPECT_NE(dir, "/tmp/.cache/cuxfer/machines");
}

}  // namespace
}  // namespace cuxfer::model
