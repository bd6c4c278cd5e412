// `cuxfer tune`'s decisions, as pure functions over measured samples
// (docs/tune.md): whether a candidate policy entry is kept, how noisy the
// runs were, and which candidates get runs of their own within the bound on
// the number of runs. No I/O, no clocks: tests/unit/analyzer/tune_test.cpp
// drives them with made-up samples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cuxfer::tune {

// An effect counts only when it is larger than the run-to-run noise, and the
// noise is never taken as less than this (2 %): a few runs underestimate it.
inline constexpr double kMinNoise = 0.02;

// Median of the samples (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> samples);

// Relative run-to-run noise of a group of samples: (max - min) / median, at
// least kMinNoise. With fewer than two samples (or a zero median) it is kMinNoise.
double relative_noise(const std::vector<double>& samples);

// The noise a comparison is judged against: the larger of the two groups' spreads (max - min),
// over median(base), at least kMinNoise. Over the baseline's median, not each group's own: the
// effect is a fraction of the baseline, and a candidate that made its sites 3x faster would
// otherwise have its spread divided by a third of the baseline, tripling its noise.
double comparison_noise(const std::vector<double>& base, const std::vector<double>& now);

// Relative improvement of `now` over `base`: (median(base) - median(now)) /
// median(base); positive is faster. 0 when median(base) is 0.
double relative_effect(const std::vector<double>& base, const std::vector<double>& now);

// What was measured for one candidate: per run, the summed CPU-blocked time
// of the copy call sites the candidate changes, and the whole run's wall time
// (the child process, by cuxfer's steady clock). `base` from runs without any
// policy, `now` from runs with the candidate applied (alone or with others).
struct CandidateSamples {
  bool zero_copy = false;  // an allocation-site entry: also changes kernels' speed
  std::vector<double> base_site_ns, now_site_ns;
  std::vector<double> base_wall_ns, now_wall_ns;
};

enum class Verdict {
  Keep,
  Slower,     // its call sites, or the whole run, got slower
  Noise,      // the effect is not larger than the run-to-run noise
  NoEffect,   // no measurable time at its call sites, or no improvement at all
};

struct Judgement {
  Verdict verdict = Verdict::NoEffect;
  double site_effect = 0, site_noise = 0;  // relative, positive = faster
  double wall_effect = 0, wall_noise = 0;
  std::string reason;  // one phrase for people: "run-to-run noise (4.1%) is larger than the effect (1.2%)"
  bool keep() const { return verdict == Verdict::Keep; }
};

// The rule (docs/tune.md, "The decision"):
//   site effect  = relative_effect(base_site, now_site), noise = comparison_noise of the same;
//   wall effect  = relative_effect(base_wall, now_wall), noise likewise;
//   keep  iff  site effect > site noise                       (its call sites got faster, beyond noise)
//         and  wall effect >= -wall noise                     (the whole run did not get slower, beyond noise)
//         and  (not zero_copy or wall effect > wall noise)    (zero-copy: the whole run got faster, beyond
//                                                              noise: its kernels' cost is not in the sites' time)
Judgement judge(const CandidateSamples& samples);

// Percent with one decimal: "4.1%".
std::string percent(double fraction);

// The bound on runs: 1 observe run, `reps` baseline and `reps` all-candidate
// runs, then `reps` per candidate evaluated on its own, and `reps` to confirm
// a winning set no run measured as a whole.
uint32_t minimum_runs(uint32_t reps);  // 1 + 2 * reps

// What the all-candidates runs said about one candidate, for planning.
struct CombinedOutcome {
  bool zero_copy = false;
  bool kept = false;  // judge() on the all-candidates runs kept it
  uint64_t estimated_gain_ns = 0;
};

// Which candidates get runs of their own (indices, in the order to run them),
// given `runs_left` after the observe, baseline and all-candidate runs. Only
// with two or more candidates (one candidate's all-candidate runs are its own).
// Suspicious, in this order of priority:
//   1. every candidate when the all-candidates runs made the whole run slower
//      beyond noise (`combined_wall_worse`), zero_copy ones first;
//   2. zero_copy candidates (their whole-run effect is mixed with the others');
//   3. candidates the all-candidates runs rejected (another one may have hurt them);
// each group by estimated gain, largest first. As many as fit: each takes
// `reps` runs, and `reps` more are held back to confirm the winning set.
std::vector<size_t> plan_solo_runs(const std::vector<CombinedOutcome>& outcomes, bool combined_wall_worse,
                                   uint32_t reps, uint32_t runs_left);

}  // namespace cuxfer::tune
