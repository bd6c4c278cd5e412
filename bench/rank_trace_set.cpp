#include "bench/rank_trace_set.h"

#include <algorithm>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "trace/event.h"
#include "trace/format.h"
#include "trace/records.h"
#include "trace/writer.h"

namespace cuxfer::bench {
namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;
constexpr uint64_t kModuleBase = 0x400000;
// The training step's call sites (offsets into /opt/app/train), and the
// evaluation hook only one rank runs.
constexpr uint64_t kUploadSite = 0x1040, kReadbackSite = 0x1280, kPinnedUploadSite = 0x14c0,
                   kDeviceSite = 0x1700, kEvalSite = 0x2a10;
constexpr uint64_t kStartRealtimeNs = 1'790'000'000'000'000'000ull;  // late 2026
constexpr uint64_t kStartMonotonicNs = 5'000'000'000ull;

struct Copy {
  trace::Direction dir;
  trace::MemKind host;  // the host side (Device for D2D)
  uint64_t bytes;
  uint64_t cpu_ns;  // before jitter and slowness
  bool async;
  uint32_t site;  // id in the trace's call-site table
};

// One step of the training loop: 8 copies.
constexpr size_t kStepCopies = 8;
Copy step_copy(size_t i, bool pinned_reads) {
  using D = trace::Direction;
  using K = trace::MemKind;
  switch (i % kStepCopies) {
    case 0:
      return {D::HtoD, K::Pageable, 1 * MiB, 170'000, false, 1};  // batch upload
    case 1:
    case 2:
    case 3:
    case 4:  // metrics read back
      return {D::DtoH, pinned_reads ? K::Pinned : K::Pageable, 4 * KiB, pinned_reads ? 2'500 : 9'000, true,
              2};
    case 5:
    case 6:
      return {D::HtoD, K::Pinned, 256 * KiB, 3'000, true, 3};  // prefetched tensors
    default:
      return {D::DtoD, K::Device, 2 * MiB, 4'000, true, 4};  // a device-side copy
  }
}

}  // namespace

PlantedRanks plan_rank_trace_set(const RankTraceSetOptions& o) {
  PlantedRanks p;
  std::mt19937_64 rng(o.seed);
  p.launch_id = fmt::format("gen{:08x}", static_cast<uint32_t>(rng()));
  p.run_id = fmt::format("genhost:{}:{}", 4000 + rng() % 60000, kStartRealtimeNs);
  if (o.ranks == 0) return p;
  std::vector<uint32_t> order(o.ranks);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), rng);
  const uint32_t slow = o.slow_ranks ? o.slow_ranks : std::max(1u, o.ranks / 250);
  size_t next = 0;
  auto take = [&] { return order[next++ % order.size()]; };
  for (uint32_t i = 0; i < slow; ++i) p.slow.push_back(take());
  std::sort(p.slow.begin(), p.slow.end());
  p.slow.erase(std::unique(p.slow.begin(), p.slow.end()), p.slow.end());
  p.extra_site = take();
  p.pinned_reads = take();
  return p;
}

namespace {

bool write_rank(const RankTraceSetOptions& o, const PlantedRanks& p, uint32_t rank, const std::string& path,
                std::mt19937_64& rng, std::string& error) {
  auto w = trace::TraceWriter::create(path, 0644, &error);
  if (!w) return false;
  const uint32_t per_host = std::max(1u, o.ranks_per_host);
  trace::ProcessInfo proc;
  proc.pid = 20000 + rank;
  proc.ppid = 19000 + rank / per_host;  // torchrun's agent on the rank's host (not traced)
  proc.exe = "/opt/app/train";
  proc.argv = {"/opt/app/train", "--epochs", "1"};
  proc.hostname = fmt::format("node{:02}", rank / per_host);
  proc.trace_name = "train";
  proc.cuxfer_version = "gen_rank_traces";
  proc.start_realtime_ns = kStartRealtimeNs + rank * 1'000'000ull + rng() % 1'000'000;
  proc.start_monotonic_ns = kStartMonotonicNs;
  proc.stack_depth = 16;
  std::string buf;
  trace::encode(proc, buf);
  w->write_block(trace::BlockType::Process, buf);
  buf.clear();
  trace::encode_strings({"cudaMemcpy", "cudaMemcpyAsync"}, buf);
  w->write_block(trace::BlockType::ApiNames, buf);
  buf.clear();
  trace::encode(
      std::vector<trace::ModuleInfo>{{kModuleBase, kModuleBase, kModuleBase + 0x100000, proc.exe, ""}}, buf);
  w->write_block(trace::BlockType::Modules, buf);
  const bool extra = rank == p.extra_site;
  std::vector<trace::CallSite> sites;
  for (uint64_t off : {kUploadSite, kReadbackSite, kPinnedUploadSite, kDeviceSite})
    sites.push_back({static_cast<uint32_t>(sites.size() + 1), {kModuleBase + off}});
  if (extra) sites.push_back({5, {kModuleBase + kEvalSite}});
  buf.clear();
  trace::encode(sites, buf);
  w->write_block(trace::BlockType::CallSites, buf);

  const bool slow = std::binary_search(p.slow.begin(), p.slow.end(), rank);
  const bool pinned_reads = rank == p.pinned_reads;
  std::vector<trace::Event> block;
  block.reserve(std::min<uint64_t>(65536, o.events_per_rank + o.events_per_rank / 64 + 1));
  uint64_t t = kStartMonotonicNs + 1'000'000, written = 0;
  auto push = [&](const Copy& c) {
    trace::Event e{};
    double cpu = static_cast<double>(c.cpu_ns) * (0.95 + static_cast<double>(rng() % 1000) / 10'000.0);
    if (slow) cpu *= o.slow_factor;
    e.t_enter_ns = t;
    e.t_exit_ns = t + static_cast<uint64_t>(cpu);
    t = e.t_exit_ns + 20'000 + rng() % 180'000;
    e.bytes = c.bytes;
    e.address = c.host == trace::MemKind::Pinned ? 0x7f2000000000ull : 0x7f1000000000ull;
    e.stream = c.async ? 0x5600000100ull : 0;
    e.correlation_id = static_cast<uint32_t>(++written);
    e.thread_id = proc.pid;
    e.callsite_id = c.site;
    e.api = c.async ? 1 : 0;
    e.kind = static_cast<uint8_t>(trace::EventKind::Copy);
    e.direction = static_cast<uint8_t>(c.dir);
    const auto dev = static_cast<uint8_t>(trace::MemKind::Device), host = static_cast<uint8_t>(c.host);
    e.src_kind = c.dir == trace::Direction::HtoD ? host : dev;
    e.dst_kind = c.dir == trace::Direction::DtoH ? host : dev;
    e.flags = c.async ? trace::kFlagAsync : 0;
    e.device = static_cast<uint8_t>(rank % per_host);
    block.push_back(e);
    if (block.size() == 65536) {
      w->write_block(trace::BlockType::Events, block.data(), block.size() * sizeof(trace::Event));
      block.clear();
    }
  };
  for (uint64_t i = 0; i < o.events_per_rank; ++i) {
    push(step_copy(i, pinned_reads));
    // The evaluation hook: every 16 steps, 8 MiB read back into pageable memory.
    if (extra && i % (16 * kStepCopies) == kStepCopies - 1)
      push({trace::Direction::DtoH, trace::MemKind::Pageable, 8 * MiB, 1'600'000, false, 5});
  }
  if (!block.empty())
    w->write_block(trace::BlockType::Events, block.data(), block.size() * sizeof(trace::Event));

  // The notes the shim writes for a torchrun rank of a `cuxfer record` run
  // (shim/core/rank.cpp, shim/record/recorder.cpp).
  buf.clear();
  trace::encode_strings({fmt::format("rank: {} launcher=torchrun variable=RANK local_rank={} world_size={} "
                                     "launch_id={}",
                                     rank, rank % per_host, o.ranks, p.launch_id),
                         "run: " + p.run_id},
                        buf);
  w->write_block(trace::BlockType::Notes, buf);
  trace::Status s;
  s.cupti = trace::CuptiState::Unavailable;
  s.cupti_reason = "generated trace (bench/gen_rank_traces)";
  s.events_recorded = written;
  buf.clear();
  trace::encode(s, buf);
  w->write_block(trace::BlockType::Status, buf);
  w->write_block(trace::BlockType::End, "", 0);
  if (w->failed()) {
    error = w->error();
    return false;
  }
  return true;
}

}  // namespace

bool write_rank_trace_set(const RankTraceSetOptions& o, const std::string& dir, PlantedRanks& planted,
                          std::string& error) {
  planted = plan_rank_trace_set(o);
  const uint32_t per_host = std::max(1u, o.ranks_per_host);
  for (uint32_t rank = 0; rank < o.ranks; ++rank) {
    std::mt19937_64 rng(o.seed * 1'000'003 + rank);
    const std::string path =
        fmt::format("{}/cuxfer-train-rank{}-node{:02}-{}.trace", dir, rank, rank / per_host, 20000 + rank);
    if (!write_rank(o, planted, rank, path, rng, error)) return false;
    planted.paths.push_back(path);
  }
  return true;
}

}  // namespace cuxfer::bench
