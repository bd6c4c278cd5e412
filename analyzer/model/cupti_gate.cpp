#include "analyzer/model/cupti_gate.h"

#include <algorithm>

namespace cuxfer::model {

GateTimeline::GateTimeline(std::vector<trace::CuptiGateChange> changes) : changes_(std::move(changes)) {
  std::stable_sort(changes_.begin(), changes_.end(), [](const auto& x, const auto& y) { return x.t_ns < y.t_ns; });
}

bool GateTimeline::on_throughout(uint64_t a, uint64_t b) const {
  if (changes_.empty()) return true;
  // The state at `a`: the last change at or before it (none: on).
  auto it = std::upper_bound(changes_.begin(), changes_.end(), a,
                             [](uint64_t t, const trace::CuptiGateChange& c) { return t < c.t_ns; });
  if (it != changes_.begin() && !std::prev(it)->on) return false;
  // ... and nothing turned them off before `b` was over.
  for (; it != changes_.end() && it->t_ns <= b; ++it)
    if (!it->on) return false;
  return true;
}

uint64_t GateTimeline::on_ns(uint64_t a, uint64_t b) const {
  if (b <= a) return 0;
  uint64_t total = 0, from = a;
  bool on = true;
  for (const auto& c : changes_) {
    if (c.t_ns >= b) break;
    if (c.t_ns > a) {
      if (on) total += c.t_ns - from;
      from = c.t_ns;
    }
    on = c.on;
  }
  if (on) total += b - std::max(from, a);
  return total;
}

std::optional<trace::GateReason> GateTimeline::off_reason(uint64_t t) const {
  auto it = std::upper_bound(changes_.begin(), changes_.end(), t,
                             [](uint64_t x, const trace::CuptiGateChange& c) { return x < c.t_ns; });
  if (it == changes_.begin() || std::prev(it)->on) return std::nullopt;
  return std::prev(it)->reason;
}

uint32_t GateTimeline::samples() const {
  return static_cast<uint32_t>(std::count_if(changes_.begin(), changes_.end(), [](const auto& c) {
    return c.on && c.reason == trace::GateReason::Sample;
  }));
}

}  // namespace cuxfer::model
