// `cuxfer tune`'s plan after the first measurements, as pure functions
// (docs/tune.md): what a candidate that got no runs of its own is judged by,
// and which runs measure the winning set. decision.h judges samples; this
// decides what follows from the judgements. No I/O: tests/unit/analyzer/tune_test.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyzer/tune/decision.h"

namespace cuxfer::tune {

// One candidate after the all-candidates runs and the solo runs.
struct Standing {
  Judgement judgement;     // from its own runs when it had them, else from the all-candidates runs
  bool zero_copy = false;
  bool ran_alone = false;
};

// A candidate the all-candidates runs kept but that had no runs of its own
// (there were not enough left) is kept only when nothing speaks against it:
// not when all candidates together made the whole run slower beyond noise
// (Slower), and not a zero_copy one, whose whole-run effect cannot be told
// apart from the others' (Noise). With one candidate the all-candidates runs
// are its own. `combined_effect` and `combined_noise` are the whole run's.
void settle_unmeasured(std::vector<Standing>& candidates, double combined_effect, double combined_noise);

// Which runs measure the winning set (the kept candidates).
enum class WinningRuns {
  Combined,        // every candidate was kept: the all-candidates runs are its runs
  Solo,            // one candidate kept, which ran alone: its runs
  Confirm,         // several kept, or one without runs of its own: `reps` more runs of that set
  CombinedNoRoom,  // as Confirm, but --max-runs leaves no room: compared with the all-candidates runs, said so
  NoneKept,        // nothing kept: compared with the all-candidates runs, for what they did
};
WinningRuns choose_winning_runs(const std::vector<Standing>& candidates, uint32_t runs_left, uint32_t reps);

// The confirming runs overrule the kept set when it made the whole run slower
// beyond noise: every kept candidate is then rejected.
inline bool confirm_rejects(double wall_effect, double wall_noise) { return wall_effect < -wall_noise; }

}  // namespace cuxfer::tune
