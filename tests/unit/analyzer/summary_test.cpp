// Job summaries (analyses/summary.h): the report of summaries equals the
// report of the traces, exactly, however the processes are grouped into
// summaries and in whatever order the summaries come; bad summaries are
// refused in one line; -j gives the same summary as one thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <regex>

#include <nlohmann/json.hpp>

#include "analyzer/analyses/summary.h"
#include "analyzer/analyses/tally.h"
#include "analyzer/cli/summary_inputs.h"
#include "analyzer/render/csv_renderer.h"
#include "analyzer/render/json_renderer.h"
#include "analyzer/render/text_renderer.h"
#include "bench/rank_trace_set.h"
#include "tests/unit/analyzer/job_fixture.h"
#include "tests/unit/analyzer/managed_traces.h"
#include "trace/python_frame.h"

namespace cuxfer::testing {
namespace {

using trace::Direction;
using trace::EventKind;
using trace::MemKind;

constexpr uint64_t KiB = 1 << 10;
constexpr uint64_t MiB = 1 << 20;

class Summary : public JobTest {
 protected:
  // The report of the traces, as `cuxfer report --no-profile --no-symbols` makes it.
  std::pair<std::string, std::string> direct(std::vector<std::string> paths) {
    std::sort(paths.begin(), paths.end());  // as a directory is read
    const model::Job job = load_paths(paths);
    return render(analyses::analyze(job));
  }
  // Each trace reduced to its record, as `cuxfer summarize` does.
  std::vector<analyses::ProcessRecord> records_of(const std::vector<std::string>& paths) {
    cli::SymbolOptions symbols;
    symbols.enabled = false;
    std::vector<std::string> errors;
    auto out = cli::summarize_traces(paths, symbols, 1, errors);
    EXPECT_TRUE(errors.empty());
    return out;
  }
  // Records through a summary file's text and back.
  std::vector<analyses::ProcessRecord> round_trip(const std::vector<analyses::ProcessRecord>& records) {
    analyses::SummaryHeader header;
    header.symbols = "off";
    const std::string text = analyses::write_summary(header, records);
    std::vector<analyses::ProcessRecord> out;
    std::string error;
    EXPECT_TRUE(analyses::read_summary(text, header, out, error)) << error;
    return out;
  }
  std::pair<std::string, std::string> of_records(std::vector<analyses::ProcessRecord> records) {
    analyses::MergedJob m = analyses::merge_records(std::move(records));
    return render(analyses::analyze_tally(m.job, m.tally, {}, false));
  }
  // The JSON, and the text followed by the --csv and --ranges-csv tables.
  static std::pair<std::string, std::string> render(const analyses::Report& r) {
    render::TextOptions to;
    to.width = 120;
    to.stacks = true;
    return {render::render_json(r, render::JsonOptions{}),
            render::render_text(r, to) + "\n--csv\n" + render::render_callsites_csv(r) + "\n--ranges-csv\n" +
                render::render_ranges_csv(r)};
  }
  // Groupings: one summary of all; one per trace; random groups in random
  // order, each through its file's text; a summary of summaries (a tree).
  void expect_every_grouping(const std::vector<std::string>& paths,
                             const std::pair<std::string, std::string>& want, uint64_t seed) {
    EXPECT_EQ(of_records(round_trip(records_of(paths))), want) << "one summary of all";
    std::vector<analyses::ProcessRecord> singles;
    for (const auto& p : paths)
      for (auto& r : round_trip(records_of({p}))) singles.push_back(std::move(r));
    EXPECT_EQ(of_records(std::move(singles)), want) << "one summary per trace";

    std::mt19937_64 rng(seed);
    for (int trial = 0; trial < 4; ++trial) {
      std::vector<std::string> shuffled = paths;
      std::shuffle(shuffled.begin(), shuffled.end(), rng);
      std::vector<analyses::ProcessRecord> all;
      std::vector<std::vector<analyses::ProcessRecord>> summaries;
      for (size_t at = 0; at < shuffled.size();) {
        const size_t n = std::min<size_t>(shuffled.size() - at, 1 + rng() % 7);
        summaries.push_back(round_trip(records_of({shuffled.begin() + at, shuffled.begin() + at + n})));
        at += n;
      }
      // Merge the first half of the summaries into one (a node's summary of
      // its tasks' summaries), then all together.
      std::vector<analyses::ProcessRecord> tree;
      for (size_t i = 0; i < summaries.size() / 2; ++i)
        for (auto& r : summaries[i]) tree.push_back(std::move(r));
      for (auto& r : round_trip(tree)) all.push_back(std::move(r));
      for (size_t i = summaries.size() / 2; i < summaries.size(); ++i)
        for (auto& r : summaries[i]) all.push_back(std::move(r));
      std::shuffle(all.begin(), all.end(), rng);
      EXPECT_EQ(of_records(std::move(all)), want) << "trial " << trial;
    }
  }
  std::vector<std::string> rank_set(uint32_t ranks, uint64_t events, uint64_t seed) {
    bench::RankTraceSetOptions o;
    o.ranks = ranks;
    o.events_per_rank = events;
    o.seed = seed;
    o.slow_ranks = 2;
    bench::PlantedRanks planted;
    std::string error;
    EXPECT_TRUE(bench::write_rank_trace_set(o, dir_.string(), planted, error)) << error;
    return planted.paths;
  }
  // Processes with NVTX ranges, managed memory and content fingerprints (the
  // first two all three): range stacks shared across processes in other
  // orders (one holding no copy, one name holding " / "), a process without
  // ranges; unified memory per allocation site; duplicate uploads and round
  // trips. What a summary keeps beyond the calls' sums.
  std::vector<std::string> parts_traces() {
    std::vector<std::string> paths;
    for (uint32_t k = 0; k < 5; ++k) {
      SyntheticTrace t =
          k < 2 ? managed_training(8000 + k, 20 + 5 * static_cast<int>(k), k == 0, 0x400000 + k * 0x10000)
                : SyntheticTrace(8000 + k);
      t.process.trace_name = "parts" + std::to_string(k);
      const uint32_t a = t.site(0x401000 + k), b = t.site(0x402000);
      std::vector<std::vector<std::string>> names = {
          {"step"}, {"step", "load"}, {"eval"}, {"step", "fwd / bwd"}};
      std::rotate(names.begin(), names.begin() + k % names.size(), names.end());
      std::vector<uint32_t> stacks;
      for (const auto& n : names) stacks.push_back(t.nvtx_stack(n));
      auto fingerprint = [&](uint32_t correlation_id, uint64_t hash, uint64_t device_ptr) {
        trace::Event& f = t.add(EventKind::Fingerprint, trace::kFingerprintApiName, Direction::HtoD,
                                MemKind::Unknown, MemKind::Unknown, MiB, 300);
        f.correlation_id = correlation_id;
        f.address = hash;
        f.stream = device_ptr;
      };
      for (int i = 0; i < 120; ++i) {
        if (i % 20 == 0 && k != 4) t.nvtx_ranges(t.process.pid, i % 60 == 40 ? 0 : stacks[(i / 20) % 3]);
        const bool up = i % 3 != 0;
        const uint32_t corr =
            t.copy(up ? Direction::HtoD : Direction::DtoH, i % 4 ? MemKind::Pageable : MemKind::Pinned,
                   (1 + i % 3) * MiB, 200'000 + 100 * i, i % 5 == 0, i % 2 ? a : b)
                .correlation_id;
        if (k >= 1) fingerprint(corr, (i / 24) % 3, 0xd000 + i % 2);
      }
      // Round trips: a download's contents uploaded to another buffer.
      for (int j = 0; j < 4 && k >= 1; ++j) {
        fingerprint(t.copy(Direction::DtoH, MemKind::Pageable, 2 * MiB, 90'000, false, b).correlation_id,
                    100 + j, 0xe000);
        fingerprint(t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 95'000, false, a).correlation_id,
                    100 + j, 0xf000 + j);
      }
      paths.push_back(write(t, "cuxfer-parts-" + std::to_string(k) + ".trace"));
    }
    return paths;
  }
};

// Groupings: one summary of all; one per trace; random groups in random
// order, each through its file's text; a summary of summaries (a tree).
TEST_F(Summary, MergedSummariesEqualTheDirectReportOnEveryGrouping) {
  const auto paths = rank_set(24, 400, 5);
  const auto want = direct(paths);
  ASSERT_NE(want.second.find("Ranks"), std::string::npos) << want.second;
  expect_every_grouping(paths, want, 17);
}

// Processes that exercise every tally-based part: the rewrite (staged and
// registered copies, the pool, registrations, passthrough reasons), failed
// copies, memsets, allocations, GPU times, async and large pageable copies,
// a tiny-copy storm, peer copies, two devices, copies without a site.
TEST_F(Summary, EveryTallyPartSurvivesTheSummary) {
  std::vector<std::string> paths;
  for (uint32_t k = 0; k < 3; ++k) {
    SyntheticTrace t(5000 + k, k == 0 ? 1 : 5000);
    t.process.trace_name = "train-" + std::to_string(k);
    t.status.cupti = k == 1 ? trace::CuptiState::Active : trace::CuptiState::Unavailable;
    if (k == 2)
      t.notes.push_back("rewrite: pin: enabled; 1D copies of pageable memory are staged from 8388608 bytes (H2D) and "
                        "262144 bytes (D2H); reused buffers from 1048576 bytes are registered in place");
    t.modules.push_back({0x400000, 0x400000, 0x500000, "/opt/app/train", ""});
    const uint32_t a = t.site(0x401000 + k), b = t.site({0x402000, 0x403000});
    for (int i = 0; i < 30; ++i) {
      auto& up = t.copy(Direction::HtoD, MemKind::Pageable, (i % 3 + 1) * MiB, 400'000 + 1000 * i, i % 2, a);
      if (k == 1) t.gpu(up, 150'000 + 10 * i);
      t.copy(Direction::DtoH, MemKind::Pinned, 2 * MiB, 60'000 + 7 * i, true, b);
      // Pinned async uploads of varied return times: the job's median (over
      // every process's, a summary's from its histogram) prices the async
      // pageable uploads above.
      t.copy(Direction::HtoD, MemKind::Pinned, 4 * MiB, 2'000 + 13 * i * (k + 1), true, b);
      t.copy(Direction::HtoD, MemKind::Pinned, 4 * MiB, 90'000, false, b);
    }
    for (int i = 0; i < 1200; ++i) t.copy(Direction::DtoH, MemKind::Pageable, 4, 9'000 + i % 50, false, a);
    if (k == 2) {
      auto& s = t.copy(Direction::HtoD, MemKind::Pageable, 16 * MiB, 700'000, false, a);
      s.flags |= trace::kFlagStaged;
      auto& r = t.copy(Direction::HtoD, MemKind::Pageable, 2 * MiB, 50'000, false, b);
      r.flags |= trace::kFlagRegistered;
      t.copy(Direction::HtoD, MemKind::Pageable, 64 * KiB, 9'000, false, a).passthrough =
          static_cast<uint8_t>(trace::PassthroughReason::BelowThreshold);
      t.add(EventKind::HostAlloc, "cuxfer:staging_pool", Direction::Unknown, MemKind::Unknown, MemKind::Pinned,
            256 * MiB, 41'000'000, 0, t.site(0x404000));
      t.add(EventKind::HostRegister, "cuxfer:register", Direction::Unknown, MemKind::Unknown, MemKind::Registered,
            2 * MiB, 300'000);
    }
    auto& failed = t.copy(Direction::HtoD, MemKind::Pageable, 8 * MiB, 1'000);
    failed.flags |= trace::kFlagFailed;
    failed.result = 1;
    t.copy(Direction::HtoD, MemKind::Pageable, 3 * MiB, 500'000);  // no call site
    t.add(EventKind::Memset, "cudaMemset", Direction::Unknown, MemKind::Device, MemKind::Device, MiB, 5'000);
    t.add(EventKind::DeviceAlloc, "cudaMalloc", Direction::Unknown, MemKind::Unknown, MemKind::Device, 64 * MiB,
          80'000);
    t.add(EventKind::HostAlloc, "cudaMallocHost", Direction::Unknown, MemKind::Unknown, MemKind::Pinned, 8 * MiB,
          200'000);
    auto& peer = t.add(EventKind::Copy, "cudaMemcpyPeer", Direction::Peer, MemKind::Device, MemKind::Device, MiB,
                       20'000, 0, b);
    peer.address = 2;  // from device 1
    peer.device = 0;
    auto& other = t.copy(Direction::HtoD, MemKind::Pinned, MiB, 30'000, false, b);
    other.device = 1;
    paths.push_back(write(t, "cuxfer-train-" + std::to_string(k) + ".trace"));
  }
  const auto want = direct(paths);
  EXPECT_NE(want.first.find("median return time of async copies from pinned memory"), std::string::npos);
  for (const char* part : {"rewrite_candidates", "tiny_storm", "async_pageable", "large_pageable", "\"pool_allocations\": 1", "\"registrations\": 1", "\"src_device\": 1", "\"staged_cpu_ns\": 700000"})
    EXPECT_NE(want.first.find(part), std::string::npos) << part << " not in the report: the test lost its point";
  EXPECT_EQ(of_records(round_trip(records_of(paths))), want);
  std::vector<analyses::ProcessRecord> reversed;
  for (auto it = paths.rbegin(); it != paths.rend(); ++it)
    for (auto& r : round_trip(records_of({*it}))) reversed.push_back(std::move(r));
  EXPECT_EQ(of_records(std::move(reversed)), want);
}

// NVTX ranges, managed memory, duplicate uploads and round trips: the
// report of summaries, in every grouping, is the report of the traces (text,
// JSON, --csv and --ranges-csv).
TEST_F(Summary, RangesManagedMemoryAndRepeatedCopiesEqualTheDirectReport) {
  const auto paths = parts_traces();
  const auto want = direct(paths);
  for (const char* part : {"duplicate_uploads", "round_trips", "managed_migrations", "Managed memory",
                           "fwd / bwd", "step / load"})
    EXPECT_NE((want.first + want.second).find(part), std::string::npos)
        << part << " not in the report: the test lost its point";
  expect_every_grouping(paths, want, 23);
  // Traces read whole give the same summaries.
  cli::SymbolOptions symbols;
  symbols.enabled = false;
  std::vector<std::string> errors;
  EXPECT_EQ(of_records(round_trip(cli::summarize_traces(paths, symbols, 2, errors, /*stream=*/false))), want);
  EXPECT_TRUE(errors.empty());
}

// A summary written before it kept these parts: read, its processes left out
// of them, and one line says which parts and how many processes; written
// again (a summary of it), it still lacks them.
TEST_F(Summary, ASummaryWrittenBeforeThePartsIsReadAndSaysSo) {
  const auto paths = parts_traces();
  analyses::SummaryHeader header;
  header.symbols = "off";
  nlohmann::json document = nlohmann::json::parse(analyses::write_summary(header, records_of(paths)));
  for (size_t i = 0; i < 2; ++i)
    for (const char* part : {"ranges", "managed", "repeated_copies"}) {
      ASSERT_TRUE(document["processes"][i].contains(part)) << part;
      document["processes"][i].erase(part);
    }
  std::vector<analyses::ProcessRecord> records;
  std::string error;
  ASSERT_TRUE(analyses::read_summary(document.dump(), header, records, error)) << error;
  ASSERT_EQ(records.size(), 5u);
  EXPECT_FALSE(records[0].kept.ranges || records[1].kept.managed || records[1].kept.repeated_copies);
  EXPECT_TRUE(records[2].kept.ranges && records[2].kept.managed && records[2].kept.repeated_copies);
  analyses::MergedJob m = analyses::merge_records(round_trip(records));
  EXPECT_EQ(m.lacking.ranges, 2u);
  EXPECT_EQ(m.lacking.managed, 2u);
  EXPECT_EQ(m.lacking.repeated_copies, 2u);
  const auto note = analyses::parts_lacking_note(m);
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(
      *note,
      "summaries written before they kept these parts leave their processes out of them: NVTX ranges (2), "
      "managed memory (2), duplicate_uploads and round_trips (2) (summarize their traces again with this "
      "cuxfer)");
  const auto notes = cli::merged_job_notes(m, {"off"});
  EXPECT_EQ(std::count(notes.begin(), notes.end(), *note), 1);
  // The parts hold the other processes' alone, never a made-up figure.
  const analyses::Report r = analyses::analyze_tally(m.job, m.tally, {}, false);
  const analyses::Report rest = analyses::analyze(load_paths({paths.begin() + 2, paths.end()}));
  ASSERT_EQ(r.ranges.size(), rest.ranges.size());
  for (size_t i = 0; i < r.ranges.size(); ++i) {
    EXPECT_EQ(r.ranges[i].path, rest.ranges[i].path);
    EXPECT_EQ(r.ranges[i].calls, rest.ranges[i].calls) << r.ranges[i].path;
    EXPECT_EQ(r.ranges[i].bytes, rest.ranges[i].bytes) << r.ranges[i].path;
  }
  EXPECT_EQ(r.managed.total.allocations, 0u);  // only the first two allocated managed memory
  // Every part known: no such line.
  EXPECT_FALSE(analyses::parts_lacking_note(analyses::merge_records(round_trip(records_of(paths)))));
}

// A summary whose parts no tally makes: one line, never a wrong number.
TEST_F(Summary, DamagedPartsAreRefusedInOneLine) {
  const auto paths = parts_traces();
  analyses::SummaryHeader header;
  header.symbols = "off";
  const nlohmann::json document =
      nlohmann::json::parse(analyses::write_summary(header, records_of({paths[1]})));
  const nlohmann::json& p = document["processes"][0];
  ASSERT_FALSE(p["ranges"]["copies"].empty());
  ASSERT_FALSE(p["managed"].empty());
  ASSERT_FALSE(p["repeated_copies"]["duplicate_uploads"].empty());
  using Damage = std::function<void(nlohmann::json&)>;
  const std::vector<std::pair<std::string, Damage>> cases = {
      {"a range stack past the stacks", [](nlohmann::json& q) { q["ranges"]["copies"][0][0] = 99; }},
      {"an empty range stack", [](nlohmann::json& q) { q["ranges"]["stacks"][0] = nlohmann::json::array(); }},
      {"more async copies than copies",
       [](nlohmann::json& q) {
         q["ranges"]["copies"][0][9] = q["ranges"]["copies"][0][4].get<uint64_t>() + 1;
       }},
      {"a range entry twice",
       [](nlohmann::json& q) { q["ranges"]["copies"].push_back(q["ranges"]["copies"][0]); }},
      {"a managed site past the sites", [](nlohmann::json& q) { q["managed"][0][0] = 999; }},
      {"on-demand bytes that do not add up",
       [](nlohmann::json& q) { q["managed"][0][7] = q["managed"][0][7].get<uint64_t>() + 1; }},
      {"a managed site twice", [](nlohmann::json& q) { q["managed"].push_back(q["managed"][0]); }},
      {"repeated copies of no copy",
       [](nlohmann::json& q) { q["repeated_copies"]["duplicate_uploads"][0][1] = 0; }},
      {"repeated copies not a list", [](nlohmann::json& q) { q["repeated_copies"]["round_trips"] = "x"; }},
      // Numbers nlohmann's get<> would wrap, truncate or convert with undefined behaviour.
      {"a site id past 32 bits (would wrap to site 1)", [](nlohmann::json& q) { q["managed"][0][0] = 4294967297ull; }},
      {"a negative count", [](nlohmann::json& q) { q["managed"][0][1] = -1; }},
      {"a fractional count", [](nlohmann::json& q) { q["managed"][0][1] = 2.9; }},
      {"a count of 1e30", [](nlohmann::json& q) { q["managed"][0][1] = 1e30; }},
      {"a negative pid", [](nlohmann::json& q) { q["trace"]["process"]["pid"] = -5; }},
  };
  for (const auto& [what, damage] : cases) {
    nlohmann::json bad = document;
    damage(bad["processes"][0]);
    std::vector<analyses::ProcessRecord> records;
    std::string error;
    EXPECT_FALSE(analyses::read_summary(bad.dump(), header, records, error)) << what;
    EXPECT_EQ(error.rfind("damaged summary: ", 0), 0u) << what << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << what;
  }
}

TEST_F(Summary, SummaryOfAnotherVersionIsRefusedInOneLine) {
  analyses::SummaryHeader header;
  std::vector<analyses::ProcessRecord> records;
  std::string error;
  EXPECT_FALSE(analyses::read_summary(R"({"schema": "cuxfer.summary/2", "processes": []})", header, records, error));
  EXPECT_NE(error.find("cuxfer.summary/2"), std::string::npos) << error;
  EXPECT_NE(error.find(analyses::kSummarySchema), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_FALSE(analyses::read_summary("not json", header, records, error));
  EXPECT_FALSE(analyses::read_summary(R"({"schema": "cuxfer.summary/1", "cuxfer_version": "x", "symbols": "off",
                                          "processes": [{"trace": {}}]})",
                                      header, records, error));
  EXPECT_NE(error.find("damaged summary"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

// Names from the traced programs need not be UTF-8 (a Latin-1 file name, a
// symbol's bytes): the summary is written with U+FFFD in their place and
// reads back, never an exception out of summarize.
TEST_F(Summary, NamesThatAreNotUtf8AreWrittenReplaced) {
  auto records = records_of(rank_set(1, 50, 5));
  ASSERT_EQ(records.size(), 1u);
  records[0].process.trace.path = dir_.string() + "/caf\xe9.trace";
  records[0].notes.push_back("symbols: \xff\xfe not UTF-8");
  analyses::SummaryHeader header;
  header.symbols = "off";
  std::string text;
  ASSERT_NO_THROW(text = analyses::write_summary(header, records));
  std::vector<analyses::ProcessRecord> back;
  std::string error;
  ASSERT_TRUE(analyses::read_summary(text, header, back, error)) << error;
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].process.trace.path, dir_.string() + "/caf\xef\xbf\xbd.trace");
  EXPECT_EQ(back[0].notes.back(), "symbols: \xef\xbf\xbd\xef\xbf\xbd not UTF-8");
}

// A trace given twice (a summary and the trace itself, two summaries of it)
// counts once, and is named.
TEST_F(Summary, ATraceGivenTwiceCountsOnce) {
  const auto paths = rank_set(4, 200, 2);
  const auto want = direct(paths);
  auto records = round_trip(records_of(paths));
  for (auto& r : records_of({paths[1], paths[3]})) records.push_back(std::move(r));
  analyses::MergedJob m = analyses::merge_records(std::move(records));
  ASSERT_EQ(m.duplicates.size(), 2u);
  EXPECT_EQ(render(analyses::analyze_tally(m.job, m.tally, {}, false)), want);
  const auto notes = cli::merged_job_notes(m, {"off"});
  EXPECT_NE(notes.at(1).find("2 processes given more than once"), std::string::npos) << notes.at(1);
}

// Ranks missing from a job are named, in runs.
TEST_F(Summary, MissingRanksAreNamed) {
  auto paths = rank_set(12, 50, 3);
  std::vector<std::string> kept;
  for (size_t r = 0; r < paths.size(); ++r)
    if (r != 3 && (r < 5 || r > 7)) kept.push_back(paths[r]);
  analyses::MergedJob m = analyses::merge_records(records_of(kept));
  const auto note = cli::missing_ranks(m.job);
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(*note, "ranks missing: 4 of world size 12 have no trace or summary here: 3, 5-7");
  EXPECT_FALSE(cli::missing_ranks(analyses::merge_records(records_of(paths)).job).has_value());
}

// The note on a Python program's copies without a Python line (threads that
// ran no Python) is the tally's: a report of summaries says what the report
// of the traces says. A summary written before it was counted leaves it
// unknown for its Python processes, said so, never a count of the others.
TEST_F(Summary, CopiesWithoutAPythonLineSurviveTheSummary) {
  std::vector<std::string> paths;
  for (uint32_t k = 0; k < 3; ++k) {
    SyntheticTrace t(6000 + k);
    t.process.trace_name = "py-" + std::to_string(k);
    const bool python = k < 2;
    if (python) t.py_codes.push_back({1, 0x030b, 10, "/work/train.py", "step", ""});
    const uint32_t script =
        python ? t.site({0x401000, trace::encode_python_frame(1, 0, true)}) : t.site(0x401000);
    const uint32_t engine = t.site({0x402000 + k});
    for (int i = 0; i < 5; ++i) t.copy(Direction::HtoD, MemKind::Pageable, 100, 1'000, false, script);
    for (uint32_t thread : {7u, 7u, 8u + k})
      t.copy(Direction::DtoH, MemKind::Pinned, 1000 * (k + 1), 1'000, false, engine).thread_id = thread;
    auto& failed = t.copy(Direction::DtoH, MemKind::Pinned, 10, 1'000, false, engine);
    failed.flags |= trace::kFlagFailed;
    failed.thread_id = 7;
    t.copy(Direction::DtoH, MemKind::Pinned, 1000, 1'000);  // no site: not counted
    paths.push_back(write(t, "cuxfer-py-" + std::to_string(k) + ".trace"));
  }
  const auto want = direct(paths);
  const std::string said =
      "8 of the 18 copies Python programs made have no Python line (8.81 KiB, on 4 threads of 2 "
      "processes)";
  ASSERT_NE(want.second.find(said), std::string::npos) << want.second;
  EXPECT_EQ(of_records(round_trip(records_of(paths))), want);
  std::vector<analyses::ProcessRecord> singles;
  for (const auto& p : paths)
    for (auto& r : round_trip(records_of({p}))) singles.push_back(std::move(r));
  EXPECT_EQ(of_records(std::move(singles)), want);

  // The same summary as an earlier cuxfer wrote it: no "python_lines".
  analyses::SummaryHeader header;
  header.symbols = "off";
  const std::string text = analyses::write_summary(header, records_of(paths));
  const std::regex counted(R"(,"python_lines":\[[0-9]+,[0-9]+,[0-9]+,[0-9]+\])");
  const std::string old = std::regex_replace(text, counted, "");
  ASSERT_EQ(std::distance(std::sregex_iterator(text.begin(), text.end(), counted), std::sregex_iterator()),
            3);
  std::vector<analyses::ProcessRecord> read;
  std::string error;
  ASSERT_TRUE(analyses::read_summary(old, header, read, error)) << error;
  const auto from_old = of_records(std::move(read));
  EXPECT_EQ(from_old.second.find("have no Python line"), std::string::npos) << from_old.second;
  EXPECT_NE(from_old.second.find(
                "copies without a Python line: not counted in 2 Python processes of summaries made "
                "by an earlier cuxfer"),
            std::string::npos)
      << from_old.second;
  // An earlier summary of a process without Python frames: nothing is unknown.
  read.clear();
  const std::string native = analyses::write_summary(header, records_of({paths[2]}));
  ASSERT_TRUE(analyses::read_summary(std::regex_replace(native, counted, ""), header, read, error)) << error;
  EXPECT_EQ(of_records(std::move(read)), direct({paths[2]}));

  // Counts no tally makes are a damaged summary, in one line.
  for (const char* bad : {",\"python_lines\":[5,6,0,1]", ",\"python_lines\":[5,2,100,0]",
                          ",\"python_lines\":[5,0,0,1]", ",\"python_lines\":[5,2,100,3]"}) {
    read.clear();
    EXPECT_FALSE(analyses::read_summary(std::regex_replace(text, counted, bad), header, read, error)) << bad;
    EXPECT_NE(error.find("damaged summary"), std::string::npos) << bad << ": " << error;
  }
}

// `cuxfer summarize` reads each trace a block of events at a time where the
// trace allows (GPU records joined by time, Python frames, many copies whose
// per-copy inputs are compacted on the way) and whole where it does not
// (GPU records with correlation ids): the summary is the same, byte for byte.
TEST_F(Summary, StreamedSummaryEqualsTheWholeRead) {
  std::vector<std::string> paths = rank_set(3, 2000, 8);
  {
    // CUPTI's records without correlation ids: joined by time.
    SyntheticTrace t(7000);
    t.process.trace_name = "gpu";
    t.status.cupti = trace::CuptiState::Active;
    t.status.cupti_reason.clear();
    const uint32_t a = t.site(0x401000), b = t.site(0x402000);
    for (int i = 0; i < 300; ++i) {
      auto& up = t.copy(Direction::HtoD, i % 3 ? MemKind::Pageable : MemKind::Pinned, (i % 5 + 1) * MiB,
                        300'000 + 100 * (i % 17), i % 2, i % 4 ? a : b);
      up.flags |= trace::kFlagGpuExpected;
      if (i % 50 != 7) t.gpu(up, 90'000 + 10 * (i % 13));  // some records missing
    }
    for (auto& r : t.gpu_records) r.correlation_id = 0;
    paths.push_back(write(t, "cuxfer-gpu.trace"));
  }
  {
    // A Python program's, with copies on threads that ran no Python.
    SyntheticTrace t(7001);
    t.process.trace_name = "py";
    t.py_codes.push_back({1, 0x030b, 10, "/work/train.py", "step", ""});
    const uint32_t script = t.site({0x401000, trace::encode_python_frame(1, 0, true)}),
                   engine = t.site(0x403000);
    for (int i = 0; i < 400; ++i)
      t.copy(Direction::HtoD, MemKind::Pageable, 4 * KiB, 9'000 + i % 11, true, script);
    for (int i = 0; i < 40; ++i)
      t.copy(Direction::DtoH, MemKind::Pinned, MiB, 80'000 + i, true, engine).thread_id = 7 + i % 3;
    paths.push_back(write(t, "cuxfer-py.trace"));
  }
  {
    // More async pageable copies than the pass holds before it compacts them.
    SyntheticTrace t(7002);
    t.process.trace_name = "many";
    t.events_per_block = 65536;
    const uint32_t a = t.site(0x401000), b = t.site(0x402000);
    for (int i = 0; i < 150'000; ++i)
      t.copy(i % 2 ? Direction::HtoD : Direction::DtoH, MemKind::Pageable, 64 * KiB * (1 + i % 3),
             5'000 + i % 1009, true, i % 7 ? a : b);
    for (int i = 0; i < 100; ++i) t.copy(Direction::HtoD, MemKind::Pinned, 4 * MiB, 2'000 + i % 9, true, b);
    paths.push_back(write(t, "cuxfer-many.trace"));
  }
  {
    // NVTX ranges on two threads: streamed as well.
    SyntheticTrace t(7004);
    t.process.trace_name = "nvtx";
    const uint32_t a = t.site(0x401000);
    const uint32_t outer = t.nvtx_stack({"step"}), inner = t.nvtx_stack({"step", "load"});
    for (int i = 0; i < 200; ++i) {
      if (i % 50 == 0) t.nvtx_ranges(7004, i % 100 ? inner : outer);
      if (i % 70 == 0) t.nvtx_ranges(7005, i % 140 ? 0 : inner);
      t.copy(Direction::HtoD, MemKind::Pageable, MiB, 300'000 + i, true, a).thread_id = 7004 + i % 2;
    }
    paths.push_back(write(t, "cuxfer-nvtx.trace"));
  }
  {
    // Content fingerprints (duplicate_uploads and round_trips, summed per site): streamed as well.
    SyntheticTrace t(7006);
    t.process.trace_name = "fingerprints";
    const uint32_t a = t.site(0x401000);
    for (int i = 0; i < 100; ++i) {
      const uint32_t corr =
          t.copy(i % 3 ? Direction::HtoD : Direction::DtoH, MemKind::Pageable, 2 * MiB, 500'000 + i, false, a)
              .correlation_id;
      trace::Event& f = t.add(trace::EventKind::Fingerprint, trace::kFingerprintApiName, Direction::HtoD,
                              MemKind::Unknown, MemKind::Unknown, 2 * MiB, 300);
      f.correlation_id = corr;
      f.address = i % 4;
      f.stream = 0xd000;
    }
    paths.push_back(write(t, "cuxfer-fingerprints.trace"));
  }
  // Managed memory, its unified-memory records among the events: streamed as well.
  paths.push_back(write(managed_training(7008, 30, false, 0x500000), "cuxfer-managed.trace"));
  {
    // The CUPTI governor turned the records off and back on, and copies
    // raced the switch to on (build_job's second pass): streamed as well.
    SyntheticTrace t(7007);
    t.process.trace_name = "governed";
    t.status.cupti = trace::CuptiState::Active;
    t.status.cupti_reason.clear();
    const uint32_t a = t.site(0x401000);
    for (int s = 0; s < 6; ++s) {
      const bool on = s % 2 == 0;
      if (s > 0) t.cupti_gate.push_back({t.clock_ns, on, on ? trace::GateReason::AsyncCopies : trace::GateReason::SyncOnly});
      for (int i = 0; i < 120; ++i) {
        trace::Event& c = t.copy(Direction::HtoD, MemKind::Pageable, (i % 3 + 1) * KiB, 8'000 + i % 7, true, a);
        if (on && (s == 0 || i >= 5)) c.flags |= trace::kFlagGpuExpected;
        if (!on) continue;
        t.gpu(c, 1'000 + 10 * (i % 11));
        t.gpu_records.back().correlation_id = 0;
        t.gpu_records.back().start_ns += i < 5 ? 30'000 - 1000 * i : 100;  // the race's DMAs queued
      }
    }
    std::stable_sort(t.gpu_records.begin(), t.gpu_records.end(),
                     [](const trace::GpuRecord& x, const trace::GpuRecord& y) { return x.start_ns < y.start_ns; });
    paths.push_back(write(t, "cuxfer-governed.trace"));
  }
  {
    // Records with correlation ids: read whole.
    SyntheticTrace t(7003);
    t.process.trace_name = "correlated";
    t.status.cupti = trace::CuptiState::Active;
    t.status.cupti_reason.clear();
    const uint32_t a = t.site(0x401000);
    for (int i = 0; i < 50; ++i)
      t.gpu(t.copy(Direction::HtoD, MemKind::Pageable, MiB, 200'000, false, a), 80'000);
    paths.push_back(write(t, "cuxfer-correlated.trace"));
  }
  cli::SymbolOptions symbols;
  symbols.enabled = false;
  for (size_t i = 0; i + 1 < paths.size(); ++i)
    EXPECT_TRUE(cli::summarize_streamed(paths[i], symbols)) << paths[i];
  EXPECT_FALSE(cli::summarize_streamed(paths.back(), symbols));
  std::vector<std::string> errors;
  analyses::SummaryHeader header;
  header.symbols = "off";
  const std::string streamed =
      analyses::write_summary(header, cli::summarize_traces(paths, symbols, 2, errors));
  const std::string whole =
      analyses::write_summary(header, cli::summarize_traces(paths, symbols, 2, errors, /*stream=*/false));
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(streamed, whole);
  // The per-copy lists are written as text, not as JSON values: each
  // process's text is the one the JSON library writes of it.
  const nlohmann::json document = nlohmann::json::parse(whole);
  for (const nlohmann::json& process : document.at("processes"))
    EXPECT_NE(whole.find(process.dump()), std::string::npos) << process.at("trace").dump();
  EXPECT_GT(document.at("processes").at(5).at("tally").at("async_pageable").size(), 1000u);
  for (const char* part : {"GPU records joined to calls by time", R"("python_lines":[440,40,)",
                           R"("stacks":[["step"])", R"("round_trips":[[)", R"("managed":[[0,)"})
    EXPECT_NE(whole.find(part), std::string::npos) << part << " not in the summary: the test lost its point";
}

// -j N: the same records as one thread, in the same order.
TEST_F(Summary, ParallelSummarizeEqualsOneThread) {
  const auto paths = rank_set(10, 300, 4);
  cli::SymbolOptions symbols;
  symbols.enabled = false;
  std::vector<std::string> errors;
  analyses::SummaryHeader header;
  const std::string one = analyses::write_summary(header, cli::summarize_traces(paths, symbols, 1, errors));
  const std::string four = analyses::write_summary(header, cli::summarize_traces(paths, symbols, 4, errors));
  EXPECT_EQ(one, four);
  EXPECT_TRUE(errors.empty());
}

}  // namespace
}  // namespace cuxfer::testing
