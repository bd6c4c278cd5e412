// duplicate_uploads and round_trips (duplicates.cpp) in the pieces both ways
// of making a report share: a process's content fingerprints by correlation
// id (the shim's EventKind::Fingerprint events), its fingerprinted copies
// (one compact entry each), and one pure function that walks them in entry
// time order and sums the copies that repeat per call site into the tally
// (FindingsTally::duplicate_sites, round_trip_sites). A report holding the
// events makes the entries from the job; a streamed one (analyses/stream.h)
// from its fingerprints pass and its tally pass, a process at a time, and
// merges the sums as the sites are merged: the findings come out the same.
// Memory holds 24 bytes per fingerprint and 40 per fingerprinted copy of the
// process being walked, never its other events.
#pragma once

#include <cstdint>
#include <vector>

#include "analyzer/analyses/report.h"
#include "analyzer/analyses/tally.h"

namespace cuxfer::analyses {

// A sampled fingerprint of a copy's host buffer and the device pointer of
// the copy (trace/event.h: the Fingerprint event's address and stream).
struct Fingerprint {
  uint64_t hash = 0, device_ptr = 0;
};

// One process's fingerprints by the correlation id of the copy each is of.
// Of several with one id (a damaged or crafted trace), the last added counts.
class Fingerprints {
 public:
  // In trace order.
  void add(uint32_t correlation_id, uint64_t hash, uint64_t device_ptr);
  // After the last add(): sorted by id, one entry per id.
  void finish();
  // The index of id's fingerprint (finished), or kNone.
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t find(uint32_t correlation_id) const;
  const Fingerprint& operator[](uint32_t index) const { return entries_[index].print; }
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    Fingerprint print;
    uint32_t correlation_id = 0;
    uint32_t order = 0;  // of the add() (the last one counts)
  };
  static_assert(sizeof(Entry) == 24);
  std::vector<Entry> entries_;
};

// A successful copy whose correlation id has a fingerprint.
struct FingerprintedCopy {
  uint64_t t_enter_ns = 0, bytes = 0;
  uint64_t time_ns = 0;  // GPU time where the copy has it, else CPU-blocked time
  uint32_t print = 0;    // Fingerprints index
  uint32_t site_id = 0;  // Job::sites index + 1 (the process's own in a streamed report), 0 = none
  uint32_t order = 0;    // trace order among the process's fingerprinted copies (set by add)
  trace::Direction direction = trace::Direction::HtoD;
};
static_assert(sizeof(FingerprintedCopy) == 40);

// The copy `c` as the walk needs it, if it is a successful copy with a
// fingerprint among `prints` (finished): appended to `copies`, in trace order.
void add_fingerprinted_copy(const model::Call& c, const Fingerprints& prints,
                            std::vector<FingerprintedCopy>& copies);

// The walk, for one process: its fingerprinted copies (in trace order) taken
// by entry time, trace order among equal times; an upload whose device buffer
// (pointer and size) last held, as far as the copies show, the same
// fingerprint is a duplicate upload, otherwise one whose fingerprint an
// earlier download of the process brought to the host is a round trip. Each
// such copy, all its time deemed recoverable, is added to `f`'s
// duplicate_sites or round_trip_sites. Sorts `copies`.
void add_repeated_copies(std::vector<FingerprintedCopy>& copies, const Fingerprints& prints,
                         FindingsTally& f);

// The walk of every process of a job that holds its events, each on its own
// (as a streamed report walks them), into `f`'s sums: what a job summary
// keeps of a process's fingerprints.
void add_job_repeated_copies(const model::Job& job, FindingsTally& f);

// The two findings from the sums (those with copies), in that order.
std::vector<Finding> repeated_copy_findings(const FindingsTally& f);

}  // namespace cuxfer::analyses
