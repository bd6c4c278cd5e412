// A job summary (`cuxfer summarize`): what the report needs of each process,
// without its events. One record per process: the trace's header (process,
// status, notes, API names), the model's per-process facts (GPU timing, the
// CUPTI governor's stats), its call sites (symbolized where the traces were)
// and its one-process tally (tally.h) with every per-copy list stored as an
// exact histogram (equal copies once, with a count).
//
// Merging is a union of records, so it is associative and exact by
// construction: a report of summaries puts every record in trace-file-name
// order (as `cuxfer report DIR` reads a directory), renumbers the call sites
// in that order and adds the tallies up with integer sums; the report's
// pure functions (analyze_tally) then run on the result, the same code as
// for the traces. The parts made from more than the calls' sums are kept as
// what their tallies need, each a process's own: the copies per NVTX range
// stack, site and class with the range stacks they index (interned by path
// when merged, as build_job interns them); unified memory per allocation
// site, whose on-demand intervals are merged within the process before it is
// written, so that only their union's length is kept; the copies that
// repeat (duplicate_uploads, round_trips) summed per site, walked from the
// process's fingerprints before it is written; and copy/compute overlap and
// sync_copy_idle, whose sums are the tally's. What needs the events
// themselves (the HTML timeline, Perfetto) is not in a summary. The schema
// is versioned (kSummarySchema); a summary of another version is refused,
// never read as this one. Parts added since a version began are optional
// keys: a summary written before them is read, and the report says in one
// line which of its parts leave which processes out (KeptParts).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analyses/report.h"
#include "analyzer/analyses/tally.h"
#include "analyzer/model/job.h"

namespace cuxfer::analyses {

inline constexpr const char* kSummarySchema = "cuxfer.summary/1";

// The parts a summary added after its schema began. False for a process of
// a summary written before it kept them: the report leaves the process out of
// that part and says so (parts_lacking_note), never counts it as nothing.
struct KeptParts {
  bool ranges = true;           // NVTX ranges: JobTally::ranges, ProcessRecord::ranges
  bool managed = true;          // unified memory: JobTally::managed
  bool repeated_copies = true;  // FindingsTally::duplicate_sites, round_trip_sites
  bool overlap = true;          // copy/compute overlap, sync_copy_idle: where its trace recorded kernels
};

// One process of a summary.
struct ProcessRecord {
  // Its trace holds the header only: no events, records or stacks, and of its
  // modules those that hold a native site's frame (what names the site by
  // build id and offset: `cuxfer check`'s budgets, policy::Site).
  model::Process process;
  // False for a summary written before summaries kept those modules: its
  // native sites cannot be named by build id.
  bool site_modules = true;
  std::vector<model::Site> sites;  // Site::process is 0
  std::vector<std::string> notes;  // the model's notes of this process (symbolization, impossible sizes)
  JobTally tally;                  // of this one process; per-copy lists as histograms
  // The NVTX range stacks its tally's ranges index (RangeKey::range), in its
  // trace's order; empty where they index the job's instead (a streamed
  // report's process: its frame holds the job's stacks, merge_streamed).
  std::vector<model::RangeStack> ranges;
  KeptParts kept;

  // The trace this record is of: host, pid, start, trace name and its notes
  // (run and rank ids). A trace and a summary of it have the same identity.
  std::string identity() const;
};

// The record of a job of one process (build_job of one trace). Takes the
// job's contents; the trace's events are freed with it. Thresholds are the
// defaults without a machine profile: a summary's estimates are those of
// `cuxfer report --no-profile`.
ProcessRecord record_process(model::Job&& job);
// The record of one process from its model (its trace's header is all that
// is kept of the trace), sites, notes and one-process tally (its per-copy
// lists compacted by the caller): record_process's, and that of a trace read
// a block at a time (stream.h summarize_streamed).
ProcessRecord make_record(model::Process&& process, std::vector<model::Site> sites,
                          std::vector<model::RangeStack> ranges, std::vector<std::string> notes,
                          JobTally tally);

// The symbolization a summary was made with ("on", "off", "python=all",
// "sysroot=DIR", ...): summaries made differently name sites differently.
struct SummaryHeader {
  std::string schema = kSummarySchema;
  std::string cuxfer_version;
  std::string symbols;
};

std::string write_summary(const SummaryHeader& header, const std::vector<ProcessRecord>& records);
// Parses a summary. False with one line in `error` for anything that is not
// a summary of this version (the line names the version found).
bool read_summary(const std::string& text, SummaryHeader& header, std::vector<ProcessRecord>& records,
                  std::string& error);

// Records merged into one job: sorted by trace file name (then path), one per
// identity (`duplicates` names the traces given twice: a summary and its own
// trace, two summaries of one trace), call sites renumbered in that order,
// tallies added up. `job` holds processes, sites and notes but no calls: run
// analyze_tally(job, tally, thresholds, /*events=*/false).
struct MergedJob {
  model::Job job;
  JobTally tally;
  std::vector<std::string> duplicates;  // trace paths counted once although given more than once
  // How many processes each part leaves out (KeptParts false: an older summary's).
  struct Lacking {
    size_t ranges = 0, managed = 0, repeated_copies = 0, overlap = 0;
  } lacking;
};
// `order`: AsGiven keeps the records' order and every one of them (the
// processes of one job streamed from its traces, analyses/stream.h).
enum class MergeOrder { ByTraceName, AsGiven };
MergedJob merge_records(std::vector<ProcessRecord> records, MergeOrder order = MergeOrder::ByTraceName);

// The findings' per-copy inputs held compactly: equal copies once with their
// count, the pinned async return times as a histogram. The findings come out
// the same (record_process; the references pass of a streamed report).
void compact_finding_inputs(FindingsTally& f);

// The note a report of summaries carries: which parts need the events.
std::string summary_report_note();
// One line where processes of older summaries are left out of parts they
// do not keep (MergedJob::lacking): which parts, how many processes.
std::optional<std::string> parts_lacking_note(const MergedJob& merged);

}  // namespace cuxfer::analyses
