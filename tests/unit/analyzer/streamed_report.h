// The report of traces made as `cuxfer report` streams it
// (cli/report_command.cpp, stream_job; analyses/stream.h), and the renderings
// a test compares with the report made holding every event.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "analyzer/analyses/stream.h"
#include "analyzer/analyses/tally.h"
#include "analyzer/render/csv_renderer.h"
#include "analyzer/render/json_renderer.h"
#include "analyzer/render/text_renderer.h"
#include "analyzer/symbolize/symbolizer.h"

namespace cuxfer::testing {

// Nullopt, with a test failure saying why, where the job needs its events.
// `plots`, if given, gathers what the HTML report draws, as `cuxfer report
// --html` does while it streams (each process's merged as it ends).
inline std::optional<analyses::Report> streamed_report(const std::vector<std::string>& paths,
                                                       analyses::CopyPlots* plots = nullptr) {
  trace::EventBlocks skip;
  skip.skip = true;
  skip.skip_gpu_records = true;
  std::vector<std::string> errs;
  auto headers = model::read_traces(paths, errs, skip);
  EXPECT_TRUE(errs.empty());
  for (const auto& h : headers)
    if (const auto why = analyses::needs_events(h)) {
      ADD_FAILURE() << *why;
      return std::nullopt;
    }
  auto sym = symbolize::make_symbolizer(false);
  const model::Job frame = model::build_job(std::move(headers), *sym);
  if (const auto why = analyses::needs_events(frame)) {
    ADD_FAILURE() << *why;
    return std::nullopt;
  }
  analyses::Thresholds t;
  std::vector<analyses::FindingsTally> inputs;
  std::vector<analyses::Fingerprints> prints;
  for (uint32_t p = 0; p < frame.processes.size(); ++p) {
    std::string why;
    auto f = analyses::stream_references(frame, p, t, &why);
    if (!f) {
      ADD_FAILURE() << "process " << p << " needs its events: " << why;
      return std::nullopt;
    }
    inputs.push_back(std::move(f->references));
    prints.push_back(std::move(f->fingerprints));
  }
  const analyses::Thresholds::RunReferences known = analyses::job_references(inputs);
  t.known = &known;
  std::vector<analyses::ProcessRecord> records;
  std::vector<uint64_t> bytes(frame.processes.size());
  for (uint32_t p = 0; p < frame.processes.size(); ++p) {
    std::string why;
    analyses::CopyPlots own;
    auto r = analyses::stream_process(frame, p, t, &prints[p], bytes[p], &why, plots ? &own : nullptr);
    if (plots) plots->merge(std::move(own));
    if (!r) {
      ADD_FAILURE() << "process " << p << " does not stream: " << why;
      return std::nullopt;
    }
    records.push_back(std::move(*r));
  }
  auto merged = analyses::merge_streamed(frame, std::move(records), bytes, t);
  if (!merged) {
    ADD_FAILURE() << "the streamed records do not merge";
    return std::nullopt;
  }
  return analyses::analyze_tally(merged->job, merged->tally, t, false);
}

// The report as JSON, as text and as the two CSV tables (--csv,
// --ranges-csv): what a comparison of two reports compares.
inline std::string render_json_and_text(const analyses::Report& r) {
  render::TextOptions to;
  to.width = 120;
  return render::render_json(r, render::JsonOptions{}) + render::render_text(r, to) +
         render::render_callsites_csv(r) + render::render_ranges_csv(r);
}

}  // namespace cuxfer::testing
