// rank_from_environment: each launcher's variables, the order of precedence,
// values that are not ranks; and the file-name tag and note it gives.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "core/rank.h"

namespace cuxfer::shim {
namespace {

struct Env {
  std::vector<std::string> strings;
  std::vector<char*> ptrs;
  Env(std::initializer_list<std::string> vars) : strings(vars) {
    for (auto& s : strings) ptrs.push_back(s.data());
    ptrs.push_back(nullptr);
  }
  char** get() { return ptrs.data(); }
};

RankResult ranks(std::initializer_list<std::string> vars, const std::string& host = "node07.cluster") {
  Env env(vars);
  return rank_from_environment(env.get(), host);
}

TEST(RankFromEnvironment, NoLauncherNoRank) {
  auto r = ranks({"PATH=/bin", "HOME=/root", "LOCAL_RANK=1"});
  EXPECT_FALSE(r.rank);
  EXPECT_EQ(r.problem, "");
  EXPECT_EQ(rank_file_tag(r.rank), "");
  EXPECT_EQ(rank_note(r.rank), "");
}

TEST(RankFromEnvironment, OpenMpi) {
  auto r = ranks({"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_SIZE=4",
                  "OMPI_MCA_orte_ess_jobid=123456"});
  ASSERT_TRUE(r.rank);
  EXPECT_EQ(r.rank->rank, 3u);
  EXPECT_EQ(r.rank->local_rank, 1u);
  EXPECT_EQ(r.rank->world_size, 4u);
  EXPECT_EQ(r.rank->launcher, "openmpi");
  EXPECT_EQ(r.rank->launch_id, "123456");
  EXPECT_EQ(rank_file_tag(r.rank), "-rank3-node07");
  EXPECT_EQ(
      rank_note(r.rank),
      "rank: 3 launcher=openmpi variable=OMPI_COMM_WORLD_RANK local_rank=1 world_size=4 launch_id=123456");
}

TEST(RankFromEnvironment, PmixPmiSlurm) {
  auto pmix = ranks({"PMIX_RANK=2", "PMIX_NAMESPACE=prterun-a-1@1"});
  ASSERT_TRUE(pmix.rank);
  EXPECT_EQ(pmix.rank->rank, 2u);
  EXPECT_EQ(pmix.rank->launcher, "pmix");
  EXPECT_EQ(pmix.rank->launch_id, "prterun-a-1@1");
  EXPECT_FALSE(pmix.rank->world_size);

  auto pmi = ranks({"PMI_RANK=5", "PMI_SIZE=8", "MPI_LOCALRANKID=1"});
  ASSERT_TRUE(pmi.rank);
  EXPECT_EQ(pmi.rank->rank, 5u);
  EXPECT_EQ(pmi.rank->launcher, "pmi");
  EXPECT_EQ(pmi.rank->world_size, 8u);
  EXPECT_EQ(pmi.rank->local_rank, 1u);

  auto slurm =
      ranks({"SLURM_PROCID=7", "SLURM_LOCALID=3", "SLURM_NTASKS=16", "SLURM_JOB_ID=991", "SLURM_STEP_ID=2"});
  ASSERT_TRUE(slurm.rank);
  EXPECT_EQ(slurm.rank->rank, 7u);
  EXPECT_EQ(slurm.rank->launcher, "slurm");
  EXPECT_EQ(slurm.rank->local_rank, 3u);
  EXPECT_EQ(slurm.rank->world_size, 16u);
  EXPECT_EQ(slurm.rank->launch_id, "991.2");
}

TEST(RankFromEnvironment, TorchrunNeedsLocalRank) {
  auto t = ranks({"RANK=5", "LOCAL_RANK=1", "WORLD_SIZE=8", "TORCHELASTIC_RUN_ID=abc"});
  ASSERT_TRUE(t.rank);
  EXPECT_EQ(t.rank->rank, 5u);
  EXPECT_EQ(t.rank->launcher, "torchrun");
  EXPECT_EQ(t.rank->local_rank, 1u);
  EXPECT_EQ(t.rank->launch_id, "abc");
  // RANK alone is a last resort, below every launcher's own variable.
  auto alone = ranks({"RANK=4"});
  ASSERT_TRUE(alone.rank);
  EXPECT_EQ(alone.rank->launcher, "env");
  auto under_slurm = ranks({"RANK=4", "SLURM_PROCID=1"});
  ASSERT_TRUE(under_slurm.rank);
  EXPECT_EQ(under_slurm.rank->rank, 1u);
  EXPECT_EQ(under_slurm.rank->launcher, "slurm");
}

TEST(RankFromEnvironment, Precedence) {
  // torchrun under srun under mpirun: the nearest launcher (torchrun) decides.
  auto all = ranks(
      {"SLURM_PROCID=0", "PMI_RANK=1", "PMIX_RANK=2", "OMPI_COMM_WORLD_RANK=3", "RANK=9", "LOCAL_RANK=0"});
  ASSERT_TRUE(all.rank);
  EXPECT_EQ(all.rank->rank, 9u);
  auto mpi = ranks({"SLURM_PROCID=0", "PMI_RANK=1", "PMIX_RANK=2", "OMPI_COMM_WORLD_RANK=3"});
  EXPECT_EQ(mpi.rank->rank, 3u);
  auto pmix = ranks({"SLURM_PROCID=0", "PMI_RANK=1", "PMIX_RANK=2"});
  EXPECT_EQ(pmix.rank->rank, 2u);
  auto pmi = ranks({"SLURM_PROCID=0", "PMI_RANK=1"});
  EXPECT_EQ(pmi.rank->rank, 1u);
}

TEST(RankFromEnvironment, GarbageGivesNoRankAndOneLine) {
  for (const char* bad : {"abc", "", "-1", "3x", " 3", "2147483648", "99999999999999999999"}) {
    auto r = ranks({"RANK=" + std::string(bad), "LOCAL_RANK=0", "SLURM_PROCID=1"});
    EXPECT_FALSE(r.rank) << bad;
    EXPECT_EQ(r.problem, "RANK=" + std::string(bad) +
                             " is not a rank (expected a number); the trace is not named by rank")
        << bad;
    EXPECT_EQ(r.problem.find('\n'), std::string::npos);
  }
  auto r = ranks({"OMPI_COMM_WORLD_RANK=abc"});
  EXPECT_FALSE(r.rank);
  EXPECT_NE(r.problem.find("OMPI_COMM_WORLD_RANK=abc"), std::string::npos);
  // A bad local rank or size is left out; the rank stands.
  auto partial = ranks({"SLURM_PROCID=2", "SLURM_LOCALID=x", "SLURM_NTASKS="});
  ASSERT_TRUE(partial.rank);
  EXPECT_EQ(partial.rank->rank, 2u);
  EXPECT_FALSE(partial.rank->local_rank);
  EXPECT_FALSE(partial.rank->world_size);
}

TEST(RankFromEnvironment, NameAndNoteAreWords) {
  auto r = ranks({"PMIX_RANK=1", "PMIX_NAMESPACE=a b\tc"}, "we ird/host.example.org");
  ASSERT_TRUE(r.rank);
  EXPECT_EQ(rank_file_tag(r.rank), "-rank1-we_ird_host");
  EXPECT_EQ(rank_note(r.rank), "rank: 1 launcher=pmix variable=PMIX_RANK launch_id=a_b_c");
  auto nohost = ranks({"PMIX_RANK=1"}, "");
  EXPECT_EQ(rank_file_tag(nohost.rank), "-rank1");
}

}  // namespace
}  // namespace cuxfer::shim
