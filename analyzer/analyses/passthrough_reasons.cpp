// Why the rewrite left pageable copies as the app made them, per reason: the
// shim records the reason in each copy's event where it decided
// (trace::PassthroughReason), the one pass over the calls counts them per
// process (tally.h), and this turns the counts into the report's list, most
// bytes first. What a reason's line says that the event cannot (the staging
// threshold, why the rewrite turned itself off) comes from the trace's notes.
#include <algorithm>
#include <array>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "analyzer/analyses/report.h"
#include "analyzer/analyses/tally.h"
#include "analyzer/text/units.h"

namespace cuxfer::analyses {
namespace {

using Why = trace::PassthroughReason;

// "... staged from N bytes (H2D) and M bytes (D2H) ...": the shim's note at start (record/recorder.cpp).
std::optional<uint64_t> stage_min_from_notes(const trace::Trace& t, int dir) {
  constexpr std::string_view kPrefix = "rewrite: pin: enabled; 1D copies of pageable memory are staged from ";
  constexpr std::string_view kBetween = " bytes (H2D) and ";
  for (const std::string& n : t.notes) {
    if (n.rfind(kPrefix, 0) != 0) continue;
    std::string_view rest = std::string_view(n).substr(kPrefix.size());
    if (dir == 1) {
      const size_t k = rest.find(kBetween);
      if (k == std::string_view::npos) return std::nullopt;
      rest = rest.substr(k + kBetween.size());
    }
    uint64_t v = 0;
    if (text::parse_unsigned(rest.substr(0, rest.find(' ')), v)) return v;
    return std::nullopt;
  }
  return std::nullopt;
}

// A threshold as the user would set it: "8 MiB", "256 KiB", else format_bytes().
std::string threshold_text(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return text::format_bytes(bytes);
}

// The text between `prefix` and `until` of the first note that starts with `prefix`.
std::string note_part(const trace::Trace& t, std::string_view prefix, std::string_view until) {
  for (const std::string& n : t.notes) {
    if (n.rfind(prefix, 0) != 0) continue;
    std::string_view rest = std::string_view(n).substr(prefix.size());
    return std::string(rest.substr(0, rest.find(until)));
  }
  return {};
}

// One line's words; `details` holds what the notes of the processes said, each once.
std::string describe(Why why, const std::string& direction, std::optional<uint64_t> threshold,
                     const std::set<std::string>& details, bool only_old_traces) {
  auto joined = [&](std::string_view fallback) {
    std::string out;
    for (const std::string& d : details) out += (out.empty() ? "" : "; ") + d;
    return out.empty() ? std::string(fallback) : out;
  };
  switch (why) {
    case Why::BelowThreshold: {
      const std::string var = "CUXFER_STAGE_MIN_" + direction;
      return threshold ? fmt::format("below the staging threshold ({} {})", var, threshold_text(*threshold))
                       : fmt::format("below the staging threshold ({})", var);
    }
    case Why::GlobalCapture: return "beside a graph capture (global mode)";
    case Why::NoFreeBuffer: return "no staging buffer free at the time";
    case Why::NotOneDimensional: return "2D/3D/array/batch copy (the rewrite takes 1D copies)";
    case Why::StreamCapturing: return "stream being captured";
    case Why::PolicyPassthrough: return "a policy's passthrough";
    case Why::PolicyExclude: return "a policy's exclude";
    case Why::NotPolicySite: return "not a policy site (a policy file without --rewrite=pin)";
    case Why::NoPool:
      return "staging declined in its context (no pool: " + joined("every pool slot taken") + ")";
    case Why::PoolGoing: return "its context's staging pool was being given back (context teardown)";
    case Why::NoContext: return "no current context";
    case Why::RewriteDisabled: return "rewrite disabled (" + joined("see the notes") + ")";
    case Why::ForkChild: return "rewrite off in a fork child (CUDA does not carry over fork)";
    case Why::NoDriver: return "driver entry points not found (yet)";
    case Why::StagingFailed: return "staging's first DMA refused (the app's own call reported the error)";
    case Why::NotPageable: return "host side not pageable as the shim saw it";
    case Why::NotHostDevice: return "not a 1D host<->device copy as the shim classified it";
    case Why::Empty: return "empty (0 bytes)";
    case Why::NoDecision: return "no decision (see the notes)";
    case Why::AfterGlobalCapture:
      return "async, after the program's first graph capture in global mode (a rewritten async copy could make "
             "its next stream sync fail beside a capture)";
    case Why::None:
      return only_old_traces ? "reason not recorded (traces before format version 2)" : "reason not recorded";
  }
  return "a reason this cuxfer does not know (written by a newer one)";
}

}  // namespace

std::vector<PassthroughReasonTotals> passthrough_reasons(const model::Job& job, const JobTally& tally,
                                                         const std::vector<bool>& on) {
  struct Slot {
    ReasonCount n;
    std::set<std::optional<uint64_t>> thresholds;  // below_threshold: each process's
    std::set<std::string> details;                 // from the notes, each once
    bool old_traces_only = true;                   // not_recorded: every process was format 1
  };
  // Index: reason slot, then direction (kept apart only below the threshold).
  std::array<std::array<Slot, 2>, kReasonSlots> slots{};
  for (size_t i = 0; i < job.processes.size() && i < tally.processes.size(); ++i) {
    if (!on[i]) continue;
    const trace::Trace& t = job.processes[i].trace;
    const ReasonCounts& counts = tally.processes[i].passthrough_reasons;
    for (size_t why = 0; why < kReasonSlots; ++why) {
      for (int dir = 0; dir < 2; ++dir) {
        const ReasonCount& c = counts[why][dir];
        if (c.calls == 0) continue;
        const bool by_direction = why == static_cast<size_t>(Why::BelowThreshold);
        Slot& s = slots[why][by_direction ? dir : 0];
        s.n.calls += c.calls;
        s.n.bytes += c.bytes;
        if (by_direction) s.thresholds.insert(stage_min_from_notes(t, dir));
        if (why == static_cast<size_t>(Why::RewriteDisabled)) {
          const std::string d = note_part(t, "rewrite: pin disabled: ", "; copies pass through");
          if (!d.empty()) s.details.insert(d);
        }
        if (why == static_cast<size_t>(Why::NoPool)) {
          const std::string d =
              note_part(t, "rewrite: pin: more than ", "; copies in the others pass through");
          if (!d.empty()) s.details.insert("more than " + d);
        }
        if (why == static_cast<size_t>(Why::None) && t.format_version >= 2) s.old_traces_only = false;
      }
    }
  }
  std::vector<PassthroughReasonTotals> out;
  for (size_t why = 0; why < kReasonSlots; ++why) {
    for (int dir = 0; dir < 2; ++dir) {
      const Slot& s = slots[why][dir];
      if (s.n.calls == 0) continue;
      PassthroughReasonTotals r;
      const auto reason = static_cast<Why>(why);
      r.reason = trace::to_string(reason);  // "unknown" for the slot past the known values
      if (reason == Why::BelowThreshold) {
        r.direction = dir == 0 ? "H2D" : "D2H";
        if (s.thresholds.size() == 1) r.threshold_bytes = *s.thresholds.begin();
      }
      r.text = describe(reason, r.direction, r.threshold_bytes, s.details, s.old_traces_only);
      r.calls = s.n.calls;
      r.bytes = s.n.bytes;
      out.push_back(std::move(r));
    }
  }
  // Most bytes first; equal bytes, most copies first; then the order above.
  std::stable_sort(out.begin(), out.end(),
                   [](const PassthroughReasonTotals& a, const PassthroughReasonTotals& b) {
                     return a.bytes != b.bytes ? a.bytes > b.bytes : a.calls > b.calls;
                   });
  return out;
}

}  // namespace cuxfer::analyses
