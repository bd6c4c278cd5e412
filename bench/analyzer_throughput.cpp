// How fast the analyzer reads and analyzes a trace, and what an event costs on
// disk (issue bars: >= 5 M events/s on one core, <= 32 bytes per event).
//
//   analyzer_throughput [--events N] [--threads T] [--sites S] [--out FILE]
//
// Writes a trace the way the shim does (blocks of up to 65536 events, zstd)
// with realistic variety — T threads interleaved, S call sites, a mix of sizes,
// directions and memory kinds, timestamps 1-50 us apart — then times, in this
// process: read_trace, build_job (no symbolization), and analyze. Prints one
// machine-readable line per phase and the totals.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "analyzer/analyses/report.h"
#include "analyzer/model/job.h"
#include "analyzer/symbolize/symbolizer.h"
#include "trace/reader.h"
#include "trace/writer.h"

using namespace cuxfer;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool write_trace(const std::string& path, uint64_t events, uint32_t threads, uint32_t sites) {
  std::string error;
  auto w = trace::TraceWriter::create(path, 0600, &error);
  if (!w) {
    std::fprintf(stderr, "analyzer_throughput: %s\n", error.c_str());
    return false;
  }
  trace::ProcessInfo p;
  p.pid = 4242;
  p.exe = "/opt/app/train";
  p.stack_depth = 16;
  std::string payload;
  trace::encode(p, payload);
  w->write_block(trace::BlockType::Process, payload);
  payload.clear();
  trace::encode_strings({"cudaMemcpy", "cudaMemcpyAsync", "cuMemcpyHtoDAsync_v2"}, payload);
  w->write_block(trace::BlockType::ApiNames, payload);
  std::vector<trace::CallSite> cs;
  for (uint32_t s = 1; s <= sites; ++s) cs.push_back({s, {0x401000ull + s * 64, 0x402000ull + s * 16, 0x7f0000001000ull}});
  payload.clear();
  trace::encode(cs, payload);
  w->write_block(trace::BlockType::CallSites, payload);

  std::mt19937_64 rng(42);
  const uint64_t sizes[] = {4, 64, 4096, 65536, 1 << 20, 8 << 20, 64 << 20};
  std::vector<trace::Event> block;
  block.reserve(65536);
  uint64_t t = 1'000'000'000;
  for (uint64_t i = 0; i < events; ++i) {
    trace::Event e{};
    t += 1000 + rng() % 49000;
    uint64_t size = sizes[rng() % 7];
    e.t_enter_ns = t;
    e.t_exit_ns = t + 2000 + size / 8 + rng() % 500;
    e.bytes = size;
    e.address = 0x7f1200000000ull + (rng() % 64) * (64ull << 20);
    e.stream = rng() % 3 == 0 ? 0 : 0x5600000000ull + (rng() % 4) * 0x100;
    e.correlation_id = static_cast<uint32_t>(i + 1);
    e.thread_id = 1000 + static_cast<uint32_t>(rng() % threads);
    e.callsite_id = 1 + static_cast<uint32_t>(rng() % sites);
    e.api = static_cast<uint16_t>(rng() % 3);
    e.kind = static_cast<uint8_t>(trace::EventKind::Copy);
    bool h2d = rng() % 2;
    e.direction = static_cast<uint8_t>(h2d ? trace::Direction::HtoD : trace::Direction::DtoH);
    auto host = static_cast<uint8_t>(rng() % 3 ? trace::MemKind::Pageable : trace::MemKind::Pinned);
    e.src_kind = h2d ? host : static_cast<uint8_t>(trace::MemKind::Device);
    e.dst_kind = h2d ? static_cast<uint8_t>(trace::MemKind::Device) : host;
    e.flags = e.api == 0 ? 0 : trace::kFlagAsync;
    e.device = 0;
    block.push_back(e);
    if (block.size() == 65536 || i + 1 == events) {
      w->write_block(trace::BlockType::Events, block.data(), block.size() * sizeof(trace::Event));
      block.clear();
    }
  }
  w->write_block(trace::BlockType::End, nullptr, 0);
  return !w->failed();
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t events = 5'000'000;
  uint32_t threads = 8, sites = 200;
  std::string out = "/tmp/cuxfer-analyzer-throughput.trace";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--events") events = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--threads") threads = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--sites") sites = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--out") out = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: analyzer_throughput [--events N] [--threads T] [--sites S] [--out FILE]\n");
      return 2;
    }
  }
  if (events == 0 || threads == 0 || sites == 0) return 2;
  ::unlink(out.c_str());
  if (!write_trace(out, events, threads, sites)) return 1;
  struct stat st {};
  ::stat(out.c_str(), &st);

  auto t0 = std::chrono::steady_clock::now();
  std::vector<trace::Trace> traces(1);
  std::string error;
  if (trace::read_trace(out, traces[0], error) != trace::ReadStatus::Ok) {
    std::fprintf(stderr, "analyzer_throughput: %s\n", error.c_str());
    return 1;
  }
  double read_s = seconds_since(t0);
  auto t1 = std::chrono::steady_clock::now();
  auto symbolizer = symbolize::make_symbolizer(false);
  model::Job job = model::build_job(std::move(traces), *symbolizer);
  double model_s = seconds_since(t1);
  auto t2 = std::chrono::steady_clock::now();
  analyses::Report report = analyses::analyze(job);
  double analyze_s = seconds_since(t2);
  double total = read_s + model_s + analyze_s;
  std::printf("phase=read seconds=%.3f\nphase=model seconds=%.3f\nphase=analyze seconds=%.3f\n", read_s, model_s,
              analyze_s);
  std::printf("events=%llu file_bytes=%lld bytes_per_event=%.2f events_per_second=%.0f\n",
              static_cast<unsigned long long>(events), static_cast<long long>(st.st_size),
              static_cast<double>(st.st_size) / static_cast<double>(events), static_cast<double>(events) / total);
  ::unlink(out.c_str());
  return 0;
}
