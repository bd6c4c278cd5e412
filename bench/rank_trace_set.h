// A realistic multi-rank trace set: one trace per rank of one torchrun job, as
// `cuxfer record -- torchrun --nproc-per-node 8 ...` would leave them (the
// shim's rank note with RANK/LOCAL_RANK/WORLD_SIZE and the torchrun run id,
// the record run's note, `cuxfer-train-rank<R>-<host>-<pid>.trace`), each
// written with the trace library the shim uses, events in blocks, so that
// millions of events per rank cost no memory here.
//
// Every rank runs the same training step — a batch upload from pageable
// memory (sync, 1 MiB), small async reads back into pageable memory, pinned
// async uploads, device-to-device copies — with a few per cent of jitter, and
// the generator plants rank-dependent imbalance that a report must find:
//   - slow ranks: their copies take `slow_factor` times as long (a shared
//     link, a busy host), same copies and bytes;
//   - one rank with an extra call site: an evaluation hook that reads 8 MiB
//     back into pageable memory every few steps, a site no other rank has;
//   - a rank with another pattern: its small reads go to pinned memory
//     (classes and findings unlike the others').
// The planted ranks depend on the seed; `PlantedRanks` says which they are.
// Used by tests (tests/unit/analyzer/rank_scale_test.cpp) and by
// bench/gen_rank_traces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cuxfer::bench {

struct RankTraceSetOptions {
  uint32_t ranks = 8;
  uint64_t events_per_rank = 1000;  // copies per rank (the extra site's come on top)
  uint64_t seed = 1;
  uint32_t ranks_per_host = 8;  // node00 holds ranks 0-7, node01 8-15, ...
  uint32_t slow_ranks = 0;      // 0: about one in 250, at least one
  double slow_factor = 4.0;
};

struct PlantedRanks {
  std::vector<uint32_t> slow;      // ascending
  uint32_t extra_site = 0;         // the rank with a call site of its own
  uint32_t pinned_reads = 0;       // the rank whose small reads go to pinned memory
  std::string launch_id;           // torchrun's run id in every rank note
  std::string run_id;              // the record run's id in every run note
  std::vector<std::string> paths;  // the traces, in rank order
};

// Which ranks get which imbalance: a pure function of the options (seed
// included), so a test can know them without writing a trace. With four ranks
// or more the planted ranks are all different.
PlantedRanks plan_rank_trace_set(const RankTraceSetOptions& o);

// Writes the traces into `dir` (which must exist). False, and why in `error`,
// when a trace could not be written.
bool write_rank_trace_set(const RankTraceSetOptions& o, const std::string& dir, PlantedRanks& planted,
                          std::string& error);

}  // namespace cuxfer::bench
