#include "analyzer/tune/plan.h"

#include <fmt/format.h>

namespace cuxfer::tune {

void settle_unmeasured(std::vector<Standing>& candidates, double combined_effect, double combined_noise) {
  if (candidates.size() < 2) return;
  const bool combined_worse = combined_effect < -combined_noise;
  for (Standing& c : candidates) {
    if (c.ran_alone || !c.judgement.keep()) continue;
    if (combined_worse) {
      c.judgement.verdict = Verdict::Slower;
      c.judgement.reason = fmt::format("all candidates together made the whole run {} slower (noise {}), and "
                                       "there were not enough runs left (--max-runs) to run it alone",
                                       percent(-combined_effect), percent(combined_noise));
    } else if (c.zero_copy) {
      c.judgement.verdict = Verdict::Noise;
      c.judgement.reason = "its effect on the whole run could not be told apart from the other candidates' "
                           "(zero_copy is judged on the whole run), and there were not enough runs left "
                           "(--max-runs) to run it alone";
    }
  }
}

WinningRuns choose_winning_runs(const std::vector<Standing>& candidates, uint32_t runs_left, uint32_t reps) {
  size_t kept = 0;
  const Standing* one = nullptr;
  for (const Standing& c : candidates)
    if (c.judgement.keep()) ++kept, one = &c;
  if (kept == 0) return WinningRuns::NoneKept;
  if (kept == candidates.size()) return WinningRuns::Combined;
  if (kept == 1 && one->ran_alone) return WinningRuns::Solo;
  return runs_left >= reps ? WinningRuns::Confirm : WinningRuns::CombinedNoRoom;
}

}  // namespace cuxfer::tune
