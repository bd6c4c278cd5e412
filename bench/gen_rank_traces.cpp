// Writes a realistic multi-rank trace set (bench/rank_trace_set.h): one trace
// per rank of one torchrun job, with planted slow ranks, a rank with a call
// site of its own and a rank with another pattern, for tests and benchmarks
// of the multi-rank report.
//
//   gen_rank_traces --ranks N --events-per-rank M --out DIR [--seed S]
//                   [--slow-ranks K] [--slow-factor F] [--ranks-per-host H]
//
// DIR is made if missing. Prints which ranks were planted, one line each, so
// that a script can check that a report names them.
#include <sys/stat.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/rank_trace_set.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: gen_rank_traces --ranks N --events-per-rank M --out DIR [--seed S] [--slow-ranks K] "
               "[--slow-factor F] [--ranks-per-host H]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  cuxfer::bench::RankTraceSetOptions o;
  std::string out;
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage();
    const char* v = argv[i + 1];
    if (a == "--ranks")
      o.ranks = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    else if (a == "--events-per-rank")
      o.events_per_rank = std::strtoull(v, nullptr, 10);
    else if (a == "--seed")
      o.seed = std::strtoull(v, nullptr, 10);
    else if (a == "--slow-ranks")
      o.slow_ranks = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    else if (a == "--slow-factor")
      o.slow_factor = std::strtod(v, nullptr);
    else if (a == "--ranks-per-host")
      o.ranks_per_host = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    else if (a == "--out")
      out = v;
    else
      return usage();
  }
  if (out.empty() || o.ranks == 0 || o.events_per_rank == 0 || !(o.slow_factor > 0)) return usage();
  if (::mkdir(out.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "gen_rank_traces: cannot make %s: %s\n", out.c_str(), std::strerror(errno));
    return 1;
  }
  cuxfer::bench::PlantedRanks planted;
  std::string error;
  if (!cuxfer::bench::write_rank_trace_set(o, out, planted, error)) {
    std::fprintf(stderr, "gen_rank_traces: %s\n", error.c_str());
    return 1;
  }
  std::string slow;
  for (uint32_t r : planted.slow) slow += (slow.empty() ? "" : " ") + std::to_string(r);
  std::printf("traces=%u dir=%s launch_id=%s\n", o.ranks, out.c_str(), planted.launch_id.c_str());
  std::printf("slow_ranks=%s\nextra_site_rank=%u\npinned_reads_rank=%u\n", slow.c_str(), planted.extra_site,
              planted.pinned_reads);
  return 0;
}
