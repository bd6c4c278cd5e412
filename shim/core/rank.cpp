#include "core/rank.h"

#include <charconv>
#include <string_view>

namespace cuxfer::shim {
namespace {

// Where each launcher keeps the rank, the rank on the host, the job's size
// and an id of the launch (names as the launchers set them; "" = none).
struct LauncherVars {
  const char* launcher;
  const char* rank;
  const char* local_rank;
  const char* world_size;
  const char* launch_ids[2];  // the first set one; SLURM's is job.step
};

constexpr LauncherVars kLaunchers[] = {
    {"torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE", {"TORCHELASTIC_RUN_ID", ""}},
    {"openmpi",
     "OMPI_COMM_WORLD_RANK",
     "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_SIZE",
     {"OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE"}},
    {"pmix", "PMIX_RANK", "", "", {"PMIX_NAMESPACE", ""}},
    {"pmi", "PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE", {"", ""}},
    {"slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", {"SLURM_JOB_ID", ""}},
    {"env", "RANK", "", "WORLD_SIZE", {"", ""}},
};

std::optional<std::string_view> lookup(char** env, std::string_view name) {
  if (name.empty()) return std::nullopt;
  for (char** e = env; e && *e; ++e) {
    std::string_view kv(*e);
    if (kv.size() > name.size() && kv[name.size()] == '=' && kv.substr(0, name.size()) == name)
      return kv.substr(name.size() + 1);
  }
  return std::nullopt;
}

std::optional<uint32_t> parse_rank(std::string_view s) {
  uint32_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size() || v >= (1u << 31)) return std::nullopt;
  return v;
}

// A value written into a note or a file name: no spaces, no control characters.
std::string word(std::string_view s, bool file_name) {
  std::string out;
  for (char c : s) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == '-' ||
                       (!file_name && static_cast<unsigned char>(c) > ' ' && c != 0x7f);
    out += plain ? c : '_';
  }
  return out;
}

}  // namespace

RankResult rank_from_environment(char** env, const std::string& host) {
  RankResult out;
  for (const auto& l : kLaunchers) {
    const auto value = lookup(env, l.rank);
    if (!value) continue;
    // RANK counts as torchrun's only next to LOCAL_RANK; alone, it is the last resort.
    if (std::string_view(l.launcher) == "torchrun" && !lookup(env, "LOCAL_RANK")) continue;
    const auto rank = parse_rank(*value);
    if (!rank) {
      out.problem = std::string(l.rank) + "=" + std::string(*value) +
                    " is not a rank (expected a number); the trace is not named by rank";
      return out;
    }
    RankInfo info;
    info.rank = *rank;
    info.launcher = l.launcher;
    info.variable = l.rank;
    info.host = host;
    if (auto v = lookup(env, l.local_rank)) info.local_rank = parse_rank(*v);
    if (auto v = lookup(env, l.world_size)) info.world_size = parse_rank(*v);
    for (const char* id : l.launch_ids) {
      if (auto v = lookup(env, id); v && !v->empty()) {
        info.launch_id = word(*v, false);
        if (info.launcher == "slurm")
          if (auto step = lookup(env, "SLURM_STEP_ID")) info.launch_id += "." + word(*step, false);
        break;
      }
    }
    out.rank = std::move(info);
    return out;
  }
  return out;
}

std::string rank_file_tag(const std::optional<RankInfo>& rank) {
  if (!rank) return {};
  std::string host = word(std::string_view(rank->host).substr(0, rank->host.find('.')), true);
  if (host.size() > 64) host.resize(64);
  return "-rank" + std::to_string(rank->rank) + (host.empty() ? std::string() : "-" + host);
}

std::string rank_note(const std::optional<RankInfo>& rank) {
  if (!rank) return {};
  std::string note =
      "rank: " + std::to_string(rank->rank) + " launcher=" + rank->launcher + " variable=" + rank->variable;
  if (rank->local_rank) note += " local_rank=" + std::to_string(*rank->local_rank);
  if (rank->world_size) note += " world_size=" + std::to_string(*rank->world_size);
  if (!rank->launch_id.empty()) note += " launch_id=" + rank->launch_id;
  return note;
}

}  // namespace cuxfer::shim
