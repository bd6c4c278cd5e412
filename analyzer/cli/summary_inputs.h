// What `report` and `summarize` share for job summaries (analyses/summary.h):
// telling summaries from traces among the paths given, reading summaries,
// summarizing traces on several threads (-j), and the checks every job of
// summaries gets (two runs mixed, ranks missing, a trace given twice).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analyses/summary.h"
#include "analyzer/cli/options.h"
#include "analyzer/cli/trace_inputs.h"

namespace cuxfer::cli {

// -j N: how many traces are read and reduced at once (default: the machine's cores).
size_t default_jobs();
// Runs work(0) ... work(count - 1) on up to `jobs` threads.
void for_each_parallel(size_t count, size_t jobs, const std::function<void(size_t)>& work);

// A file that begins (after white space) with '{': a summary, not a trace
// (a trace begins with its binary magic).
bool is_summary_file(const std::string& path);

// The paths given, directories expanded to their traces, repeated files
// dropped, split into traces and summaries (each in the order given).
struct InputPaths {
  std::vector<std::string> traces, summaries;
};
InputPaths split_inputs(const std::vector<std::string>& paths, std::vector<std::string>& errors);

// How the traces' call sites are named: written into a summary, so that
// summaries made differently are noticed.
std::string symbols_description(const SymbolOptions& symbols);

// Reads each trace (on `jobs` threads), builds its one-process model with
// its own symbolizer and reduces it to its record; the records come back in
// the order of `paths`. A trace that cannot be used adds one line to
// `errors` and is skipped. Each trace is streamed (summarize_streamed) where
// it allows and `stream` is set, else read whole: the records are the same
// (`stream` false is for the tests that say so).
std::vector<analyses::ProcessRecord> summarize_traces(const std::vector<std::string>& paths,
                                                      const SymbolOptions& symbols, size_t jobs,
                                                      std::vector<std::string>& errors, bool stream = true);

// The record of the trace at `path` made a block of events at a time
// (analyses::summarize_streamed of its frame: the trace read without its
// events); nullopt where it needs its events, or cannot be read (the whole
// read then says why).
std::optional<analyses::ProcessRecord> summarize_streamed(const std::string& path,
                                                          const SymbolOptions& symbols);

// Reads the summaries into `records`; `symbols` gets each summary's
// symbolization, once each. False (after one line "<command>: <path>: <why>"
// on stderr) for the first that cannot be read: another version, damaged,
// not a summary.
bool load_summaries(const std::vector<std::string>& paths, const char* command,
                    std::vector<analyses::ProcessRecord>& records, std::vector<std::string>& symbols);

// The records of the inputs: the summaries read (false, after one line, for
// one that cannot be: the caller exits 2), then the traces reduced on `jobs`
// threads (a trace that cannot be used adds its line to `errors`); every line
// of `errors` is then said on stderr as "<command>: <why>"; `symbols` gets
// every symbolization used, once each.
bool gather_records(const InputPaths& inputs, const SymbolOptions& options, size_t jobs, const char* command,
                    std::vector<analyses::ProcessRecord>& records, std::vector<std::string>& symbols,
                    std::vector<std::string>& errors);

// The traces' ranks say how many there are (world_size) and some are not
// among them: one line naming them ("ranks missing: 3, 17-19 (world size
// 1000)"), or none.
std::optional<std::string> missing_ranks(const model::Job& job);

// The notes a job made of summaries carries: what needs the events, parts
// older summaries lack, traces counted once, different symbolizations, ranks
// missing.
std::vector<std::string> merged_job_notes(const analyses::MergedJob& merged, const std::vector<std::string>& symbols);

}  // namespace cuxfer::cli
