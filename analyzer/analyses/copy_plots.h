// What the HTML report's plots draw from the copies themselves, rather than
// from the report's tables: the achieved bandwidth per class and size, and
// the timeline. Gathered one process at a time, in bounded memory, from the
// calls as they are made: a report that streams its traces (analyses/stream.h)
// fills it while it reads them, a report holding the events from the job
// (copy_plots), with the same code, so that both draw the same picture byte
// for byte.
//
// Bounded: the bandwidth keeps, per class and power-of-two size, how many
// copies reached each bandwidth rounded to 1/1024 of a power of two (the
// median is taken over those: within 0.05% of the copies' own), never a value
// per copy. The timeline keeps, per lane (a thread's calls, a GPU stream's
// records), its busy time and its kTimelineItems longest items, and of the
// job only the kTimelineLanes busiest lanes: the picture the report draws is
// made of those, whatever the number of events.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "analyzer/model/job.h"

namespace cuxfer::analyses {

// Lanes and items the timeline shows at most: more is not readable.
inline constexpr size_t kTimelineLanes = 24;
inline constexpr size_t kTimelineItems = 4000;

// The bin of an achieved bandwidth (GB/s, positive): its double's sign,
// exponent and first 10 bits of mantissa, so that bins keep the values'
// order and each spans 1/1024 of a power of two. Pure.
uint32_t bandwidth_bin(double gbps);
// The middle of a bin: what the plot shows of the values in it.
double bandwidth_bin_value(uint32_t bin);

// Achieved bandwidth against size, per transfer class.
class BandwidthTally {
 public:
  // A call; counted where it is a successful copy of some bytes whose time
  // measures its transfer. `order`: where the call comes in the job (its
  // process, then its place there): the series are drawn in the order their
  // first copy comes.
  void add(const model::Call& c, uint64_t order);
  // Another process's (or part of the job's): the same as adding its calls.
  void merge(const BandwidthTally& other);

  struct Point {
    int bucket = 0;  // floor(log2(bytes))
    double median_gbps = 0;
    uint64_t copies = 0;
  };
  struct Series {
    model::TransferClass cls;
    std::vector<Point> points;  // by bucket
  };
  // In the order of their first copy.
  std::vector<Series> series() const;
  bool empty() const { return classes_.empty(); }
  uint64_t min_bytes = UINT64_MAX, max_bytes = 0;
  double min_gbps = 1e9, max_gbps = 0;

 private:
  struct Class {
    uint64_t first = UINT64_MAX;                           // order of its first copy
    std::map<int, std::map<uint32_t, uint64_t>> buckets;  // bucket -> bin -> copies
  };
  std::map<unsigned, Class> classes_;  // by class_index
};

// The timeline: transfers (each copy or memset call, on its thread's lane)
// and GPU activity (each record, on its stream's lane) on one time axis.
class TimelineTally {
 public:
  enum class What : uint8_t { Call, Dma, Kernel, UmMigration, UmFault };
  struct Item {
    uint64_t begin = 0, end = 0;  // real time; `end` as recorded (it may precede `begin`)
    uint64_t bytes = 0;
    uint64_t order = 0;  // drawn in this order: every process's calls, then every process's records
    uint32_t row = 0;    // in a Picture: the row of its lane
    What what = What::Call;
    int8_t cls = -1;  // class_index of the call (a DMA's: of the call it joined; -1 none)
    uint64_t span() const { return (end > begin ? end : begin + 1) - begin; }  // as drawn
  };
  // A lane's identity within its process: a thread's calls (kind 0, the
  // thread id), a GPU stream's copies and kernels (1, device, stream), a
  // device's unified-memory records (2, device).
  struct LaneKey {
    uint32_t process = 0;
    uint8_t kind = 0;
    uint32_t device = 0;
    uint64_t id = 0;
    bool operator==(const LaneKey&) const = default;
  };
  struct Lane {
    LaneKey key;  // its process keeps lanes of two processes apart, whatever their names
    std::string name;
    uint64_t busy = 0;  // every item's drawn span, kept or not
    std::vector<Item> items;
  };

  // A call of process `process` (of model Process `p`); only copies and
  // memsets are drawn. `index`: its place among the process's calls.
  void add_call(const model::Process& p, uint32_t process, const model::Call& c, uint64_t index);
  // A GPU record of process `process`; `index`: its place among the
  // process's records; `joined`: the class of the call it joined, if any.
  void add_record(const model::Process& p, uint32_t process, const trace::GpuRecord& g, uint64_t index,
                  std::optional<model::TransferClass> joined);
  // Every item and lane of another tally (of other processes), then settle().
  void merge(TimelineTally&& other);
  // Lets go of what cannot be drawn: lanes past the kTimelineLanes busiest
  // and, per lane, items past its kTimelineItems longest. Call once a
  // process's lanes are final (its end): a lane's busy time decides.
  void settle();

  struct Picture {
    std::vector<std::string> rows;  // the lanes shown, in name order
    std::vector<Item> items;        // the items shown, in drawing order (Item::row set)
    uint64_t t0 = UINT64_MAX, t1 = 0;
    uint64_t total_items = 0, total_lanes = 0;
  };
  // What the timeline draws: the busiest lanes' longest items.
  Picture picture() const;

 private:
  struct KeyHash {
    size_t operator()(const LaneKey& k) const;
  };
  // The lane of `key`, made (named by `name()`) where it is new.
  template <typename Name>
  Lane& lane(const LaneKey& key, Name name);
  void add(Lane& l, const Item& it);
  std::vector<Lane> lanes_;
  std::unordered_map<LaneKey, uint32_t, KeyHash> by_key_;  // lanes_ index
  uint64_t t0_ = UINT64_MAX, t1_ = 0, total_items_ = 0, dropped_lanes_ = 0;
};

// What the HTML report's plots need of the copies.
struct CopyPlots {
  BandwidthTally bandwidth;
  TimelineTally timeline;
  // The calls of one process, in trace order, as they are made; `next_index`
  // counts them (start at 0 per process).
  void add_calls(const model::Process& p, uint32_t process, std::span<const model::Call> calls,
                 uint64_t& next_index);
  void merge(CopyPlots&& other);
};

// The plots of a job holding its calls (build_job): its calls and its GPU
// records, coloured by the call each joined.
CopyPlots copy_plots(const model::Job& job);

}  // namespace cuxfer::analyses
