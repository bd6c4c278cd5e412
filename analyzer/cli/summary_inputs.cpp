#include "analyzer/cli/summary_inputs.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "analyzer/analyses/ranks.h"
#include "analyzer/analyses/stream.h"

namespace cuxfer::cli {

size_t default_jobs() {
  const unsigned n = std::thread::hardware_concurrency();
  return n ? n : 1;
}

void for_each_parallel(size_t count, size_t jobs, const std::function<void(size_t)>& work) {
  jobs = std::max<size_t>(1, std::min(jobs, count));
  if (jobs == 1) {
    for (size_t i = 0; i < count; ++i) work(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < jobs; ++t)
    threads.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < count;) work(i);
    });
  for (auto& t : threads) t.join();
}

bool is_summary_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  for (int c; in && (c = in.get()) != EOF;) {
    if (c == '{') return true;
    if (!std::isspace(c)) return false;
  }
  return false;
}

InputPaths split_inputs(const std::vector<std::string>& paths, std::vector<std::string>& errors) {
  InputPaths out;
  std::set<std::string> seen;
  for (const auto& p : expand_directories(paths, errors)) {
    if (!seen.insert(p).second) continue;
    (is_summary_file(p) ? out.summaries : out.traces).push_back(p);
  }
  return out;
}

std::string symbols_description(const SymbolOptions& symbols) {
  std::string s = symbols.enabled ? "on" : "off";
  if (!symbols.sysroot.empty()) s += " sysroot=" + symbols.sysroot;
  if (symbols.python_sites.frames == symbolize::PythonFrames::All) s += " python-frames=all";
  for (const auto& p : symbols.python_sites.user_packages) s += " python-user=" + p;
  return s;
}

bool gather_records(const InputPaths& inputs, const SymbolOptions& options, size_t jobs, const char* command,
                    std::vector<analyses::ProcessRecord>& records, std::vector<std::string>& symbols,
                    std::vector<std::string>& errors) {
  if (!load_summaries(inputs.summaries, command, records, symbols)) return false;
  auto traced = summarize_traces(inputs.traces, options, jobs, errors);
  for (const auto& e : errors) std::fprintf(stderr, "%s: %s\n", command, e.c_str());
  if (!traced.empty()) {
    const std::string mine = symbols_description(options);
    if (std::find(symbols.begin(), symbols.end(), mine) == symbols.end()) symbols.push_back(mine);
  }
  for (auto& r : traced) records.push_back(std::move(r));
  return true;
}

std::optional<analyses::ProcessRecord> summarize_streamed(const std::string& path,
                                                          const SymbolOptions& symbols) {
  trace::EventBlocks skip;
  skip.skip = true;
  skip.skip_gpu_records = true;  // counted, not kept
  std::vector<std::string> why;
  auto headers = model::read_traces({path}, why, skip);
  if (headers.size() != 1 || analyses::needs_events(headers.front())) return std::nullopt;
  auto symbolizer = symbols.make();  // its own: a fallback starts again with a fresh one (its notes)
  const model::Job frame = model::build_job(std::move(headers), *symbolizer, symbols.python_sites);
  return analyses::summarize_streamed(frame);
}

std::vector<analyses::ProcessRecord> summarize_traces(const std::vector<std::string>& paths,
                                                      const SymbolOptions& symbols, size_t jobs,
                                                      std::vector<std::string>& errors, bool stream) {
  // Each trace is its own job of one process, reduced and freed before the
  // worker takes the next: memory holds `jobs` traces at a time, not all.
  // Streamed where the trace allows (a block of its events at a time), read
  // whole otherwise; the record is the same either way.
  std::vector<std::optional<analyses::ProcessRecord>> records(paths.size());
  std::vector<std::string> failures(paths.size());
  for_each_parallel(paths.size(), jobs, [&](size_t i) {
    if (stream && (records[i] = summarize_streamed(paths[i], symbols))) return;
    std::vector<std::string> why;
    auto traces = model::read_traces({paths[i]}, why);
    if (traces.empty()) {
      failures[i] = why.empty() ? paths[i] + ": cannot be read" : why.front();
      return;
    }
    auto symbolizer = symbols.make();  // one per trace: a symbolizer is not shared between threads
    records[i] = analyses::record_process(model::build_job(std::move(traces), *symbolizer, symbols.python_sites));
  });
  std::vector<analyses::ProcessRecord> out;
  for (size_t i = 0; i < paths.size(); ++i) {
    if (records[i]) out.push_back(std::move(*records[i]));
    if (!failures[i].empty()) errors.push_back(failures[i]);
  }
  return out;
}

bool load_summaries(const std::vector<std::string>& paths, const char* command,
                    std::vector<analyses::ProcessRecord>& records, std::vector<std::string>& symbols) {
  for (const auto& path : paths) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    analyses::SummaryHeader header;
    std::string error;
    if (!in || !analyses::read_summary(text.str(), header, records, error)) {
      std::fprintf(stderr, "%s: %s: %s\n", command, path.c_str(), in ? error.c_str() : "cannot read");
      return false;
    }
    if (std::find(symbols.begin(), symbols.end(), header.symbols) == symbols.end()) symbols.push_back(header.symbols);
  }
  return true;
}

std::optional<std::string> missing_ranks(const model::Job& job) {
  std::set<uint32_t> present;
  uint32_t world = 0;
  for (const auto& p : job.processes)
    if (auto id = analyses::rank_of(p.trace)) {
      present.insert(id->rank);
      if (id->world_size) world = std::max(world, *id->world_size);
    }
  if (present.size() < 2 || world == 0) return std::nullopt;
  // Runs of missing ranks, "3, 17-19"; at most 20 runs named.
  std::vector<std::pair<uint32_t, uint32_t>> runs;
  uint32_t missing = 0;
  for (uint32_t r = 0; r < world; ++r) {
    if (present.count(r)) continue;
    ++missing;
    if (!runs.empty() && runs.back().second + 1 == r)
      runs.back().second = r;
    else
      runs.push_back({r, r});
  }
  if (missing == 0) return std::nullopt;
  std::string list;
  for (size_t i = 0; i < runs.size() && i < 20; ++i) {
    list += i ? ", " : "";
    list += runs[i].first == runs[i].second ? fmt::format("{}", runs[i].first)
                                            : fmt::format("{}-{}", runs[i].first, runs[i].second);
  }
  if (runs.size() > 20) list += ", ...";
  return fmt::format("ranks missing: {} of world size {} have no trace or summary here: {}", missing, world, list);
}

std::vector<std::string> merged_job_notes(const analyses::MergedJob& merged, const std::vector<std::string>& symbols) {
  std::vector<std::string> notes{analyses::summary_report_note()};
  if (auto lacking = analyses::parts_lacking_note(merged)) notes.push_back(std::move(*lacking));
  if (!merged.duplicates.empty()) {
    std::string list;
    for (size_t i = 0; i < merged.duplicates.size() && i < 5; ++i) list += (i ? ", " : "") + merged.duplicates[i];
    if (merged.duplicates.size() > 5) list += ", ...";
    notes.push_back(fmt::format("{} process{} given more than once (a summary and its own trace, or two summaries "
                                "of it) counted once: {}",
                                merged.duplicates.size(), merged.duplicates.size() == 1 ? "" : "es", list));
  }
  if (symbols.size() > 1) {
    std::string list;
    for (const auto& s : symbols) list += (list.empty() ? "" : "; ") + s;
    notes.push_back("the summaries and traces name call sites with different symbol options (" + list +
                    "): a line of code may show as two sites");
  }
  if (auto m = missing_ranks(merged.job)) notes.push_back(*m);
  return notes;
}

}  // namespace cuxfer::cli
