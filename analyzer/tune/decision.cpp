#include "analyzer/tune/decision.h"

#include <algorithm>

#include <fmt/format.h>

namespace cuxfer::tune {

double median(std::vector<double> s) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

namespace {
double spread(const std::vector<double>& s) {
  if (s.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
  return *hi - *lo;
}
}  // namespace

double relative_noise(const std::vector<double>& s) {
  const double m = median(s);
  if (s.size() < 2 || m <= 0) return kMinNoise;
  return std::max(kMinNoise, spread(s) / m);
}

double comparison_noise(const std::vector<double>& base, const std::vector<double>& now) {
  // In the effect's unit, the baseline's median: a candidate that halves its sites' time and
  // spreads by a third of that halved median has spread by a sixth of the baseline, which is
  // what the effect (a half of the baseline) must be compared with.
  const double m = median(base);
  if (m <= 0) return kMinNoise;
  return std::max(kMinNoise, std::max(spread(base), spread(now)) / m);
}

double relative_effect(const std::vector<double>& base, const std::vector<double>& now) {
  const double b = median(base);
  if (b <= 0) return 0;
  return (b - median(now)) / b;
}

std::string percent(double fraction) { return fmt::format("{:.1f}%", fraction * 100); }

Judgement judge(const CandidateSamples& s) {
  Judgement j;
  j.site_effect = relative_effect(s.base_site_ns, s.now_site_ns);
  j.site_noise = comparison_noise(s.base_site_ns, s.now_site_ns);
  j.wall_effect = relative_effect(s.base_wall_ns, s.now_wall_ns);
  j.wall_noise = comparison_noise(s.base_wall_ns, s.now_wall_ns);
  if (s.base_site_ns.empty() || s.now_site_ns.empty() || s.base_wall_ns.empty() || s.now_wall_ns.empty()) {
    j.verdict = Verdict::NoEffect;
    j.reason = "not measured";
    return j;
  }
  if (median(s.base_site_ns) <= 0) {
    j.verdict = Verdict::NoEffect;
    j.reason = "its call sites took no measurable time in the baseline runs";
    return j;
  }
  if (j.site_effect <= 0) {
    j.verdict = j.site_effect < -j.site_noise ? Verdict::Slower : Verdict::NoEffect;
    j.reason = fmt::format("its call sites did not get faster ({} slower{})", percent(-j.site_effect),
                           j.verdict == Verdict::Slower ? "" : fmt::format(", noise {}", percent(j.site_noise)));
    return j;
  }
  if (j.site_effect <= j.site_noise) {
    j.verdict = Verdict::Noise;
    j.reason = fmt::format("run-to-run noise ({}) is larger than the effect ({}) at its call sites",
                           percent(j.site_noise), percent(j.site_effect));
    return j;
  }
  if (j.wall_effect < -j.wall_noise) {
    j.verdict = Verdict::Slower;
    j.reason = fmt::format("its call sites got {} faster, but the whole run got {} slower (noise {})",
                           percent(j.site_effect), percent(-j.wall_effect), percent(j.wall_noise));
    return j;
  }
  if (s.zero_copy && j.wall_effect <= j.wall_noise) {
    j.verdict = j.wall_effect > 0 ? Verdict::Noise : Verdict::NoEffect;
    j.reason = j.wall_effect > 0
                   ? fmt::format("run-to-run noise ({}) is larger than the effect ({}) on the whole run "
                                 "(zero_copy is judged on the whole run: kernels read its memory over the bus)",
                                 percent(j.wall_noise), percent(j.wall_effect))
                   : fmt::format("the whole run did not get faster ({} slower; zero_copy is judged on the whole "
                                 "run: kernels read its memory over the bus)",
                                 percent(-j.wall_effect));
    return j;
  }
  j.verdict = Verdict::Keep;
  j.reason = fmt::format("call sites {} faster (noise {}), whole run {} {} (noise {})", percent(j.site_effect),
                         percent(j.site_noise), percent(std::abs(j.wall_effect)),
                         j.wall_effect >= 0 ? "faster" : "slower", percent(j.wall_noise));
  return j;
}

uint32_t minimum_runs(uint32_t reps) { return 1 + 2 * reps; }

std::vector<size_t> plan_solo_runs(const std::vector<CombinedOutcome>& outcomes, bool combined_wall_worse,
                                   uint32_t reps, uint32_t runs_left) {
  std::vector<size_t> order;
  if (outcomes.size() < 2 || reps == 0) return order;
  const auto group = [&](size_t i) {
    const CombinedOutcome& o = outcomes[i];
    if (combined_wall_worse) return o.zero_copy ? 0 : 1;
    if (o.zero_copy) return 2;
    if (!o.kept) return 3;
    return 4;  // not suspicious
  };
  for (size_t i = 0; i < outcomes.size(); ++i)
    if (group(i) < 4) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (group(a) != group(b)) return group(a) < group(b);
    return outcomes[a].estimated_gain_ns > outcomes[b].estimated_gain_ns;
  });
  // Each takes `reps` runs; `reps` more stay for the confirmation runs.
  const size_t fit = runs_left >= reps ? (runs_left - reps) / reps : 0;
  if (order.size() > fit) order.resize(fit);
  return order;
}

}  // namespace cuxfer::tune
