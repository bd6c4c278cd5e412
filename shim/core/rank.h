// Which rank of a multi-process job this process is, from the variables its
// launcher set (mpirun, srun, torchrun), and how that shows in the trace: in
// its file name (cuxfer-<name>-rank<R>-<host>-<pid>.trace) and in one note
// ("rank: <R> key=value ...") that the analyzer reads (docs/trace-format.md,
// "Rank note"). Pure functions, unit-tested (tests/unit/shim/rank_test.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace cuxfer::shim {

struct RankInfo {
  uint32_t rank = 0;
  std::optional<uint32_t> local_rank;  // rank on this host, when the launcher says
  std::optional<uint32_t> world_size;  // ranks in the job, when the launcher says
  std::string launcher;                // torchrun | openmpi | pmix | pmi | slurm | env
  std::string variable;                // the variable the rank came from, e.g. OMPI_COMM_WORLD_RANK
  std::string launch_id;               // the launcher's id of this launch, "" when it gives none
  std::string host;                    // gethostname()
};

struct RankResult {
  std::optional<RankInfo> rank;
  std::string problem;  // one line when a launcher variable was set but unusable
};

// The rank from `env` (environ-style, null-terminated). The first of these
// that is set decides, in this order (the launcher nearest the process first:
// torchrun starts its workers itself, under srun or mpirun too; srun's
// SLURM_PROCID is inherited by everything an allocation's step runs):
//   1. RANK with LOCAL_RANK (torchrun, and launchers that mimic it)
//   2. OMPI_COMM_WORLD_RANK (Open MPI)
//   3. PMIX_RANK (PMIx: Open MPI 5, srun --mpi=pmix)
//   4. PMI_RANK (MPICH, Intel MPI, srun --mpi=pmi2)
//   5. SLURM_PROCID (srun)
//   6. RANK alone
// A deciding value that is not a decimal number below 2^31 gives no rank and
// a problem line; the later variables are not consulted (they would name
// another launcher's view of the job).
RankResult rank_from_environment(char** env, const std::string& host);

// "-rank<R>-<host>" for the trace file name (host up to its first '.', only
// [A-Za-z0-9_-], at most 64 characters); "" without a rank.
std::string rank_file_tag(const std::optional<RankInfo>& rank);

// The trace note: "rank: <R> launcher=<l> variable=<V>[ local_rank=<n>]
// [ world_size=<n>][ launch_id=<id>]" (values without spaces); "" without a rank.
std::string rank_note(const std::optional<RankInfo>& rank);

}  // namespace cuxfer::shim
