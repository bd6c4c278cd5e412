#include "analyzer/analyses/copy_plots.h"

#include <algorithm>
#include <bit>
#include <tuple>

#include <fmt/format.h>

#include "analyzer/analyses/tally.h"
#include "analyzer/model/classify.h"

namespace cuxfer::analyses {
namespace {

// The bandwidth a call achieved, when its time measures the transfer.
std::optional<double> achieved_gbps(const model::Call& c) {
  if (c.has_gpu_time() && c.gpu_ns > 0) return static_cast<double>(c.bytes()) / static_cast<double>(c.gpu_ns);
  if (model::cpu_time_measures_transfer(*c.event, c.cls) && c.cpu_ns() > 0)
    return static_cast<double>(c.bytes()) / static_cast<double>(c.cpu_ns());
  return std::nullopt;
}

// A bin keeps the top 22 bits of its doubles: sign, exponent, 10 bits of mantissa.
constexpr int kBinShift = 42;

// Which of two items the timeline keeps first: the longer, then the earlier
// drawn (a total order: the items kept are the same whatever order they came in).
bool longer(const TimelineTally::Item& a, const TimelineTally::Item& b) {
  const uint64_t sa = a.span(), sb = b.span();
  return sa != sb ? sa > sb : a.order < b.order;
}

// Keeps the `n` longest of `items` (in no particular order).
void keep_longest(std::vector<TimelineTally::Item>& items, size_t n) {
  if (items.size() <= n) return;
  std::nth_element(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(n), items.end(), longer);
  items.resize(n);
}

// Which of two lanes the timeline shows first: the busier, then by name
// (then by process, for two processes of one pid on different hosts).
bool busier(const TimelineTally::Lane& a, const TimelineTally::Lane& b) {
  if (a.busy != b.busy) return a.busy > b.busy;
  return std::tie(a.name, a.key.process) < std::tie(b.name, b.key.process);
}

constexpr uint64_t kRecordOrder = uint64_t{1} << 63;  // records are drawn after every call
uint64_t order_of(uint32_t process, uint64_t index) { return uint64_t{process} << 40 | index; }

}  // namespace

uint32_t bandwidth_bin(double gbps) { return static_cast<uint32_t>(std::bit_cast<uint64_t>(gbps) >> kBinShift); }

double bandwidth_bin_value(uint32_t bin) {
  return std::bit_cast<double>(uint64_t{bin} << kBinShift | uint64_t{1} << (kBinShift - 1));
}

void BandwidthTally::add(const model::Call& c, uint64_t order) {
  if (c.kind() != trace::EventKind::Copy || c.failed() || c.bytes() == 0) return;
  const std::optional<double> g = achieved_gbps(c);
  if (!g || *g <= 0) return;
  Class& k = classes_[class_index(c.cls)];
  k.first = std::min(k.first, order);
  ++k.buckets[63 - std::countl_zero(c.bytes())][bandwidth_bin(*g)];
  min_bytes = std::min(min_bytes, c.bytes());
  max_bytes = std::max(max_bytes, c.bytes());
  min_gbps = std::min(min_gbps, *g);
  max_gbps = std::max(max_gbps, *g);
}

void BandwidthTally::merge(const BandwidthTally& other) {
  for (const auto& [cls, o] : other.classes_) {
    Class& k = classes_[cls];
    k.first = std::min(k.first, o.first);
    for (const auto& [bucket, bins] : o.buckets)
      for (const auto& [bin, n] : bins) k.buckets[bucket][bin] += n;
  }
  min_bytes = std::min(min_bytes, other.min_bytes);
  max_bytes = std::max(max_bytes, other.max_bytes);
  min_gbps = std::min(min_gbps, other.min_gbps);
  max_gbps = std::max(max_gbps, other.max_gbps);
}

std::vector<BandwidthTally::Series> BandwidthTally::series() const {
  std::vector<std::pair<uint64_t, unsigned>> by_first;
  for (const auto& [cls, k] : classes_) by_first.emplace_back(k.first, cls);
  std::sort(by_first.begin(), by_first.end());
  std::vector<Series> out;
  for (const auto& [first, cls] : by_first) {
    Series& s = out.emplace_back();
    s.cls = class_of_index(cls);
    for (const auto& [bucket, bins] : classes_.at(cls).buckets) {
      Point& p = s.points.emplace_back();
      p.bucket = bucket;
      for (const auto& [bin, n] : bins) p.copies += n;
      // The middle value (the upper one of an even count), as a sort would give.
      uint64_t seen = 0;
      for (const auto& [bin, n] : bins) {
        seen += n;
        if (seen > p.copies / 2) {
          p.median_gbps = bandwidth_bin_value(bin);
          break;
        }
      }
    }
  }
  return out;
}

size_t TimelineTally::KeyHash::operator()(const LaneKey& k) const {
  uint64_t h = (uint64_t{k.process} << 34 | uint64_t{k.kind} << 32 | k.device);
  return std::hash<uint64_t>()(h * 0x9E3779B97F4A7C15ull ^ k.id);
}

template <typename Name>
TimelineTally::Lane& TimelineTally::lane(const LaneKey& key, Name name) {
  auto [it, fresh] = by_key_.try_emplace(key, static_cast<uint32_t>(lanes_.size()));
  if (fresh) lanes_.push_back({key, name(), 0, {}});
  return lanes_[it->second];
}

void TimelineTally::add(Lane& l, const Item& it) {
  l.busy += it.span();
  ++total_items_;
  t0_ = std::min(t0_, it.begin);
  t1_ = std::max(t1_, it.end);
  l.items.push_back(it);
  // Twice the items shown, then back to them: each item is moved a constant
  // number of times on average, and a lane holds no more than that.
  if (l.items.size() >= 2 * kTimelineItems) keep_longest(l.items, kTimelineItems);
}

void TimelineTally::add_call(const model::Process& p, uint32_t process, const model::Call& c, uint64_t index) {
  if (c.kind() != trace::EventKind::Copy && c.kind() != trace::EventKind::Memset) return;
  const uint32_t tid = c.event->thread_id;
  Lane& l = lane({process, 0, 0, tid}, [&] { return fmt::format("pid {} tid {} (CPU)", p.pid(), tid); });
  Item it;
  it.begin = p.realtime_of(c.event->t_enter_ns);
  it.end = p.realtime_of(c.event->t_exit_ns);
  it.bytes = c.bytes();
  it.order = order_of(process, index);
  it.what = What::Call;
  it.cls = static_cast<int8_t>(class_index(c.cls));
  add(l, it);
}

void TimelineTally::add_record(const model::Process& p, uint32_t process, const trace::GpuRecord& g, uint64_t index,
                               std::optional<model::TransferClass> joined) {
  const bool kernel = g.kind == static_cast<uint8_t>(trace::GpuRecordKind::Kernel);
  const bool um = g.kind == static_cast<uint8_t>(trace::GpuRecordKind::UnifiedMemory);
  const bool fault = um && g.cupti_copy_kind >= static_cast<uint8_t>(trace::UmCounter::CpuPageFault);
  Lane& l = um ? lane({process, 2, g.device, 0},
                      [&] { return fmt::format("pid {} GPU {} unified memory", p.pid(), g.device); })
               : lane({process, 1, g.device, g.stream_id},
                      [&] { return fmt::format("pid {} GPU {} stream {}", p.pid(), g.device, g.stream_id); });
  Item it;
  it.begin = p.realtime_of(g.start_ns);
  it.end = p.realtime_of(g.end_ns);
  it.bytes = g.bytes;
  it.order = kRecordOrder | order_of(process, index);
  it.what = kernel ? What::Kernel : fault ? What::UmFault : um ? What::UmMigration : What::Dma;
  if (joined) it.cls = static_cast<int8_t>(class_index(*joined));
  add(l, it);
}

void TimelineTally::settle() {
  for (Lane& l : lanes_) keep_longest(l.items, kTimelineItems);
  if (lanes_.size() > kTimelineLanes) {
    std::nth_element(lanes_.begin(), lanes_.begin() + kTimelineLanes, lanes_.end(), busier);
    dropped_lanes_ += lanes_.size() - kTimelineLanes;
    lanes_.resize(kTimelineLanes);
  }
  by_key_.clear();
  for (uint32_t i = 0; i < lanes_.size(); ++i) by_key_.emplace(lanes_[i].key, i);
}

void TimelineTally::merge(TimelineTally&& other) {
  t0_ = std::min(t0_, other.t0_);
  t1_ = std::max(t1_, other.t1_);
  total_items_ += other.total_items_;
  dropped_lanes_ += other.dropped_lanes_;
  for (Lane& l : other.lanes_) lanes_.push_back(std::move(l));
  other = {};
  settle();
}

TimelineTally::Picture TimelineTally::picture() const {
  Picture out;
  out.t0 = t0_;
  out.t1 = t1_;
  out.total_items = total_items_;
  out.total_lanes = lanes_.size() + dropped_lanes_;
  // The busiest lanes (all of them once settled), in name order.
  std::vector<const Lane*> shown;
  for (const Lane& l : lanes_) shown.push_back(&l);
  if (shown.size() > kTimelineLanes) {
    std::nth_element(shown.begin(), shown.begin() + kTimelineLanes, shown.end(),
                     [](const Lane* a, const Lane* b) { return busier(*a, *b); });
    shown.resize(kTimelineLanes);
  }
  std::sort(shown.begin(), shown.end(), [](const Lane* a, const Lane* b) {
    return std::tie(a->name, a->key.process) < std::tie(b->name, b->key.process);
  });
  for (uint32_t row = 0; row < shown.size(); ++row) {
    out.rows.push_back(shown[row]->name);
    for (Item it : shown[row]->items) {
      it.row = row;
      out.items.push_back(it);
    }
  }
  keep_longest(out.items, kTimelineItems);
  std::sort(out.items.begin(), out.items.end(), [](const Item& a, const Item& b) { return a.order < b.order; });
  return out;
}

void CopyPlots::add_calls(const model::Process& p, uint32_t process, std::span<const model::Call> calls,
                          uint64_t& next_index) {
  for (const model::Call& c : calls) {
    const uint64_t index = next_index++;
    bandwidth.add(c, order_of(process, index));
    timeline.add_call(p, process, c, index);
  }
}

void CopyPlots::merge(CopyPlots&& other) {
  bandwidth.merge(other.bandwidth);
  timeline.merge(std::move(other.timeline));
}

CopyPlots copy_plots(const model::Job& job) {
  // One process at a time, as a streamed report gathers them.
  CopyPlots out;
  std::vector<CopyPlots> each(job.processes.size());
  std::vector<uint64_t> next(job.processes.size(), 0);
  size_t from = 0;
  while (from < job.calls.size()) {
    const uint32_t process = job.calls[from].process;
    size_t to = from;
    while (to < job.calls.size() && job.calls[to].process == process) ++to;
    each[process].add_calls(job.processes[process], process,
                            std::span<const model::Call>(job.calls.data() + from, to - from), next[process]);
    from = to;
  }
  for (uint32_t i = 0; i < job.processes.size(); ++i) {
    const model::Process& p = job.processes[i];
    for (size_t k = 0; k < p.trace.gpu_records.size(); ++k) {
      const uint32_t call = k < p.gpu_record_call.size() ? p.gpu_record_call[k] : model::kNoCall;
      std::optional<model::TransferClass> joined;
      if (call != model::kNoCall) joined = job.calls[call].cls;
      each[i].timeline.add_record(p, i, p.trace.gpu_records[k], k, joined);
    }
    each[i].timeline.settle();
    out.merge(std::move(each[i]));
  }
  return out;
}

}  // namespace cuxfer::analyses
