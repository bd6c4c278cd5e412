// `cuxfer export --perfetto` (trace-event JSON) and `cuxfer report --csv`.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "analyzer/render/csv_renderer.h"
#include "analyzer/render/perfetto_renderer.h"
#include "tests/unit/analyzer/job_fixture.h"

namespace cuxfer {
namespace {

using nlohmann::json;
using testing::JobTest;
using testing::SyntheticTrace;
using trace::Direction;
using trace::MemKind;

constexpr uint64_t kBig = (5ull << 32) + 7;  // beyond 32 bits: bytes must stay exact

SyntheticTrace gpu_trace() {
  SyntheticTrace t;
  t.modules.push_back({0x400000, 0x400000, 0x500000, "/opt/app/train", ""});
  t.status.cupti = trace::CuptiState::Active;
  uint32_t s = t.site(0x401000);
  auto& a = t.copy(Direction::HtoD, MemKind::Pinned, kBig, 2'000, true, s);
  a.stream = 0x7;
  t.gpu(a, 1'500);
  t.gpu_records.back().stream_id = 13;
  t.gpu_records.back().device = 1;
  t.gpu_records.back().cupti_copy_kind = 1;
  t.copy(Direction::DtoH, MemKind::Pageable, 4096, 5'000, false, s);
  auto& st = t.copy(Direction::HtoD, MemKind::Pageable, 1 << 20, 9'000, false, t.site(0x402000));
  st.flags |= trace::kFlagStaged;
  t.add(trace::EventKind::DeviceAlloc, "cudaMalloc", Direction::Unknown, MemKind::Unknown, MemKind::Device,
        1 << 20, 300);
  return t;
}

std::vector<json> of_phase(const json& j, const std::string& ph) {
  std::vector<json> out;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == ph) out.push_back(e);
  return out;
}

class Export : public JobTest {};

TEST_F(Export, PerfettoHasCallsGpuTracksFlowsAndMetadata) {
  SyntheticTrace t = gpu_trace();
  model::Job job = load(t);
  json j = json::parse(render::render_perfetto(job));
  ASSERT_TRUE(j["traceEvents"].is_array());

  auto xs = of_phase(j, "X");
  ASSERT_EQ(xs.size(), 5u);  // 4 calls + 1 GPU record
  const json* call = nullptr;
  const json* gpu = nullptr;
  for (const auto& e : xs) {
    if (e["cat"] == "gpu") gpu = &e;
    if (e["cat"] == "copy" && e["args"]["bytes"] == kBig) call = &e;
  }
  ASSERT_NE(call, nullptr);
  ASSERT_NE(gpu, nullptr);
  EXPECT_TRUE((*call)["args"]["bytes"].is_number_unsigned());
  EXPECT_EQ((*call)["args"]["bytes"].get<uint64_t>(), kBig);
  EXPECT_EQ((*call)["name"], "cudaMemcpyAsync");
  EXPECT_EQ((*call)["pid"], 4242);
  EXPECT_EQ((*call)["tid"], 4242);
  EXPECT_EQ((*call)["args"]["direction"], "H2D");
  EXPECT_EQ((*call)["args"]["host_memory"], "pinned");
  EXPECT_EQ((*call)["args"]["stream"], "0x7");
  EXPECT_TRUE((*call)["args"].contains("callsite"));
  EXPECT_DOUBLE_EQ((*call)["ts"].get<double>(), 0.0);  // the job's earliest event
  EXPECT_DOUBLE_EQ((*call)["dur"].get<double>(), 2.0);

  EXPECT_EQ((*gpu)["name"], "memcpy H2D");
  EXPECT_EQ((*gpu)["args"]["bytes"].get<uint64_t>(), kBig);
  EXPECT_DOUBLE_EQ((*gpu)["dur"].get<double>(), 1.5);
  EXPECT_EQ((*gpu)["pid"], 4242);
  const uint32_t gpu_tid = (*gpu)["tid"].get<uint32_t>();
  EXPECT_GE(gpu_tid, render::kGpuTrackTidBase);

  // The staged copy says so; the second copy ends 3 us + 1 us later.
  int staged = 0;
  for (const auto& e : xs)
    if (e["args"].value("staged", false)) ++staged;
  EXPECT_EQ(staged, 1);
  bool alloc = false;
  for (const auto& e : xs) alloc |= e["cat"] == "alloc" && e["name"] == "cudaMalloc";
  EXPECT_TRUE(alloc);

  // One flow pair from the call's thread to the GPU track, same id.
  auto s = of_phase(j, "s"), f = of_phase(j, "f");
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(s[0]["id"], f[0]["id"]);
  EXPECT_EQ(s[0]["tid"], 4242);
  EXPECT_EQ(s[0]["ts"], (*call)["ts"]);
  EXPECT_EQ(f[0]["tid"], gpu_tid);
  EXPECT_EQ(f[0]["ts"], (*gpu)["ts"]);

  // Metadata: process name, the CPU thread, the GPU track's name.
  std::map<std::string, std::string> names;
  for (const auto& m : of_phase(j, "M"))
    if (m["name"] == "process_name" || m["name"] == "thread_name")
      names[m["name"].get<std::string>() + "/" + std::to_string(m["tid"].get<uint32_t>())] =
          m["args"]["name"];
  EXPECT_EQ(names["process_name/0"], "train (pid 4242)");
  EXPECT_EQ(names["thread_name/4242"], "main 4242");
  EXPECT_EQ(names["thread_name/" + std::to_string(gpu_tid)], "GPU 1 stream 13");
}

TEST_F(Export, PerfettoSharesOneTimeBaseAndMarksSimulated) {
  SyntheticTrace a(100), b(200);
  a.status.simulated = true;
  b.clock_ns = a.clock_ns + 10'000;  // starts 10 us later
  a.copy(Direction::HtoD, MemKind::Pinned, 64, 1'000);
  b.copy(Direction::DtoH, MemKind::Pinned, 32, 1'000);
  model::Job job = load(std::vector<SyntheticTrace>{a, b});
  json j = json::parse(render::render_perfetto(job));
  auto xs = of_phase(j, "X");
  ASSERT_EQ(xs.size(), 2u);
  std::map<int, double> ts;
  for (const auto& e : xs) ts[e["pid"].get<int>()] = e["ts"].get<double>();
  EXPECT_DOUBLE_EQ(ts[100], 0.0);
  EXPECT_DOUBLE_EQ(ts[200], 10.0);
  bool simulated_name = false;
  for (const auto& m : of_phase(j, "M"))
    if (m["name"] == "process_name" && m["pid"] == 100)
      simulated_name = m["args"]["name"].get<std::string>().find("simulated") != std::string::npos;
  EXPECT_TRUE(simulated_name);
}

TEST_F(Export, PerfettoShowsWhenTheGovernorHadTheCopyRecordsOffAndWhy) {
  SyntheticTrace t;
  auto& first = t.copy(Direction::HtoD, MemKind::Pinned, 64, 1'000, true);
  const uint64_t t0 = first.t_enter_ns;
  t.copy(Direction::HtoD, MemKind::Pinned, 64, 1'000, true);
  auto& last = t.copy(Direction::DtoH, MemKind::Pinned, 64, 1'000, false);
  const uint64_t end = last.t_exit_ns;
  using trace::GateReason;
  t.cupti_gate = {{t0 + 3'000, true, GateReason::Sample},  // given out of order: sorted
                  {t0 + 1'000, false, GateReason::CostCap},
                  {t0 + 4'000, false, GateReason::Repeats}};
  model::Job job = load(t);
  json j = json::parse(render::render_perfetto(job));
  std::vector<json> gate;
  for (const auto& e : of_phase(j, "X"))
    if (e["cat"] == "cupti_gate") gate.push_back(e);
  ASSERT_EQ(gate.size(), 4u);  // on from the start, then the three changes
  const char* names[] = {"records on: start", "records off: cost_cap", "records on: sample", "records off: repeats"};
  const double starts[] = {0.0, 1.0, 3.0, 4.0};
  for (size_t i = 0; i < gate.size(); ++i) {
    EXPECT_EQ(gate[i]["name"], names[i]) << i;
    EXPECT_EQ(gate[i]["tid"], render::kGateTrackTid);
    EXPECT_DOUBLE_EQ(gate[i]["ts"].get<double>(), starts[i]) << i;
  }
  EXPECT_EQ(gate[1]["args"]["records"], "off");
  EXPECT_EQ(gate[1]["args"]["reason"], "cost_cap");
  // The last slice runs to the end of the process's last call.
  EXPECT_DOUBLE_EQ(gate[3]["ts"].get<double>() + gate[3]["dur"].get<double>(), (end - t0) / 1e3);
  bool named = false;
  for (const auto& m : of_phase(j, "M"))
    named = named || (m["name"] == "thread_name" && m["tid"] == render::kGateTrackTid);
  EXPECT_TRUE(named);
}

TEST_F(Export, PerfettoHasNoGovernorTrackWhenTheRecordsWereNeverGoverned) {
  SyntheticTrace t = gpu_trace();
  json j = json::parse(render::render_perfetto(load(t)));
  for (const auto& e : j["traceEvents"]) EXPECT_NE(e["tid"], render::kGateTrackTid);
}

TEST_F(Export, CsvHasOneRowPerSiteWithExactNumbersAndQuoting) {
  SyntheticTrace t = gpu_trace();
  model::Job job = load(t);
  analyses::Report r = analyses::analyze(job);
  ASSERT_EQ(r.callsites.size(), 2u);
  for (auto& s : r.callsites)
    if (s.frame.offset == 0x1000) s.frame.function = "load(int, \"x\")";
  std::string csv = render::render_callsites_csv(r);
  std::vector<std::string> lines;
  for (size_t pos = 0, nl; (nl = csv.find('\n', pos)) != std::string::npos; pos = nl + 1)
    lines.push_back(csv.substr(pos, nl - pos));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "pid,site_id,function,file,line,module,offset,class,calls,bytes,cpu_blocked_ns,gpu_ns,staged_bytes");
  // Most CPU-blocked time first: the staged site (9 us), then the two copies (2 + 5 us).
  EXPECT_EQ(lines[1], "4242,2,,,,/opt/app/train,0x2000,H2D pageable,1,1048576,9000,,1048576");
  EXPECT_EQ(lines[2], "4242,1,\"load(int, \"\"x\"\")\",,,/opt/app/train,0x1000,H2D pinned +1,2," +
                          std::to_string(kBig + 4096) + ",7000,1500,0");
}

}  // namespace
}  // namespace cuxfer
