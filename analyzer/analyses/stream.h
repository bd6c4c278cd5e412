// A report of traces in bounded memory: each process's events are read a
// block at a time, made into calls (model::CallFeed), tallied and let go; the
// per-process tallies are merged as a job's summaries are (summary.h). Memory
// holds a block of events and the tallies, never a trace's events, however
// long the run. The trace is read three times: without its events (the
// frame: processes, call sites, notes), then for the run's references, then
// for the tally (stream_references says why).
//
// GPU records are read with the events, in file order, and joined to the
// calls by time, size and kind in a bounded window (model::StreamedGpuJoin):
// a process whose records lie too far from their calls is said once
// (`why`) and the job is read whole.
//
// Exact: the report equals analyze() of build_job() of the same traces,
// which is why only jobs whose report needs nothing but the tally stream.
// The rest (GPU records joined by correlation id) take the path that holds
// the events. Kernel records stream: the first pass finds each device's
// first and last kernel, the tally's pass measures each copy against the
// kernels in a window (KernelOverlapFeed, overlap.h); a record too far out
// of order is said once (`why`) and the job is read whole. Where
// the CUPTI governor turned the records off, the join makes build_job's
// second pass in its window too. Content fingerprints stream: the
// first pass gathers each process's fingerprints, the tally's pass keeps its
// fingerprinted copies (with their GPU time, as the join hands them out),
// and at the process's end they are walked and the copies that repeat
// summed per site (duplicates.h): memory grows with the fingerprinted copies
// (at most one per copy of CUXFER_FINGERPRINT_MIN bytes, 1 MiB by default),
// not with the events. Python frames
// stream: their call sites come with the frame, and the note on copies
// without a Python line is the tally's (ProcessTally). So do NVTX ranges:
// the frame holds the range stacks, each call's is replayed as the call is
// made (model::CallFeed) and the tally sums the copies per range stack, site
// and class (RangeTally). So does unified memory: managed allocations and
// unified-memory records are fed to a ManagedFeed (managed.h) as they are
// read, each record attributed to the allocations read so far; a process
// whose allocation is written after a record it would have taken (or whose
// records lie too far out of time order) is said once (`why`) and the job is
// read whole.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analyses/copy_plots.h"
#include "analyzer/analyses/duplicates.h"
#include "analyzer/analyses/overlap.h"
#include "analyzer/analyses/summary.h"
#include "analyzer/model/job.h"
#include "trace/reader.h"

namespace cuxfer::analyses {

// Why the report of a trace read without its events and GPU records
// (trace::EventBlocks::skip, skip_gpu_records) needs them; nullopt when it may stream. Cheap:
// asked before the traces' call sites are resolved.
std::optional<std::string> needs_events(const trace::Trace& header);
// The same of the frame: model::build_job of such traces (processes, call
// sites, notes; no calls). Asks what the header cannot tell (kernel and
// records announced in the notes, the governor's gaps).
std::optional<std::string> needs_events(const model::Job& frame);

// The calls a streamed report covers, as model::keep_range leaves them
// (`cuxfer report --range NAME`): those that ran inside one of the range
// stacks `inside` marks (by the frame's Job::ranges index). The GPU join and
// the CUPTI governor's account still see every call, as build_job's do
// before keep_range; the references, the tally, the managed memory and the
// fingerprinted copies see the kept ones. Each process's calls and kept
// calls are counted in its own slot, for keep_range's note.
struct CallSelection {
  std::vector<bool> inside;
  std::vector<uint64_t> calls, kept;  // per process of the frame
  bool keeps(uint32_t range) const { return range < inside.size() && inside[range]; }
};

// A streamed report reads each process's events twice more, a block at a
// time: first for the run's references (the median return time of pinned
// async copies and the pinned bandwidth, over the whole job), then for the
// tally, which with the references known sums the findings' copies per site
// instead of listing them (Thresholds::known).
//
// What the first pass over a process's events gathers for the second.
struct FirstPass {
  // The references' inputs: the pinned copies' return times (as a
  // histogram, one entry per distinct time) and large transfers.
  FindingsTally references;
  // Its content fingerprints (finished), which the tally's pass pairs with
  // their copies for duplicate_uploads and round_trips.
  Fingerprints fingerprints;
  // Where it recorded kernels: each device's first kernel start and last
  // kernel end, between which sync_copy_idle counts copies (overlap.h).
  KernelExtents kernels;
};
// The first pass of process `process` of the frame. Nullopt when its trace
// reads differently from the first time, or its GPU records cannot be joined
// in the window.
// `why`, if given, is set when the GPU records could not be joined in the window.
// `only`, if given, chooses the calls whose references count.
std::optional<FirstPass> stream_references(const model::Job& frame, uint32_t process, const Thresholds& t,
                                           std::string* why = nullptr, const CallSelection* only = nullptr);
// The references of the whole job from every process's inputs.
Thresholds::RunReferences job_references(const std::vector<FindingsTally>& inputs);

// Process `process` of the frame tallied with `t`: in a report, with its
// `known` references set and its `fingerprints` (after stream_references
// found the process may stream), whose copies that repeat the tally sums
// (FindingsTally::duplicate_sites, round_trip_sites); in a summary, without
// the references but with its fingerprints (summarize_streamed). A record as summarize makes one (before
// its trace is cut to its header), with `event_bytes` the sum of its events'
// bytes. Nullopt when its trace reads differently from the first time, its
// GPU records cannot be joined in the window or its unified-memory records
// attributed as they come (`why` says which), or for an event of impossible size (its note's place among the job's notes
// is build_job's to say).
// `plots`, if given, gathers what the HTML report draws of the process's
// calls and GPU records (copy_plots.h; settled at the process's end), each
// record with the class of the call the streamed join gave it
// (model::StreamedGpuJoin::keep_settled_records).
// `kernel_extents`: the first pass's (FirstPass::kernels); where null and
// the process recorded kernels, its records are read once more for them.
// Its copies are measured against its kernel records as both are read
// (KernelOverlapFeed); records too far out of order make it nullopt, `why`
// saying so.
// `only`, if given, chooses the calls tallied (and counts them in its
// process's slots); not with `plots` (a record of a call left out would
// still be drawn in its class).
std::optional<ProcessRecord> stream_process(const model::Job& frame, uint32_t process, const Thresholds& t,
                                            const Fingerprints* fingerprints, uint64_t& event_bytes,
                                            std::string* why = nullptr, CopyPlots* plots = nullptr,
                                            const KernelExtents* kernel_extents = nullptr,
                                            CallSelection* only = nullptr);

// The content fingerprints of process `process` of the frame, its events
// read a block at a time and nothing else made of them (summarize_streamed's
// first pass). Nullopt when its trace reads differently from the first time.
std::optional<Fingerprints> stream_fingerprints(const model::Job& frame, uint32_t process);

// The record `cuxfer summarize` makes of the trace of a frame of one process
// (summary.h record_process of build_job of the trace), its events read a
// block at a time and tallied as a summary's are (default Thresholds: no
// profile, the references not known; its copies that repeat summed per site
// from its fingerprints, read first: stream_fingerprints), the per-copy finding inputs compacted
// now and then: memory holds a block of events and the tally, whose lists
// hold distinct entries, never the trace's events. Nullopt where the trace
// needs its events (needs_events), reads differently from the first time, or
// holds an event of impossible size: record_process of the trace read whole
// then.
std::optional<ProcessRecord> summarize_streamed(const model::Job& frame);

// The frame's records (stream_process, in process order) merged into the job
// and tally that build_job and tally_calls make of the traces; nullopt when
// the job's bytes add up to more than build_job lets a job count. Run
// analyze_tally(job, tally, t, /*events=*/false) on the result, with `t`'s
// known references those the records were tallied with.
std::optional<MergedJob> merge_streamed(const model::Job& frame, std::vector<ProcessRecord> records,
                                        const std::vector<uint64_t>& event_bytes, const Thresholds& t);

}  // namespace cuxfer::analyses
