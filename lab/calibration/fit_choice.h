// File: fit_choice.h
//
// Which runs a family's out-of-group fit is made from, which runs the choice between
// two fits is judged on, and the choice itself. gpuest-calibrate-memory chooses between
// GPUMemNet's fit and the real models' out-of-group fit with it; a GPU's own clean-run
// terms (clean_runs.h) replace the calibrated GPU's by the same rule.
#pragma once

#include <string>
#include <vector>

#include "lab/calibration/calibration.h"

namespace gpuest::calibration {

// A real model's run (a timm row) as the fits see it.
struct RealRun {
  std::string group;  // Its architecture group, left out together.
  CalibrationRow row;
  bool oom = false;  // Crashed out of memory: its bound must exceed the card.
  // Completed, but its peak holds a transient by the trace's evidence
  // (transient_evidence.h): more than the job needs, so no fit is made or judged on it.
  bool transient = false;
};

// The rows of a family's out-of-group fit: GPUMemNet's training rows of the family as
// one group ("gpumemnet-<family>") where that population joins (for the transformer
// family it does not: GPUMemNet's are text classifiers, the real ones image models),
// then the real runs in order, each left out with its architecture group. Runs that
// ran out of memory or hold a transient are predicted, never fitted on.
std::vector<GroupedRow> OutOfGroupFitRows(const std::string& family,
                                          const std::vector<CalibrationRow>& synthetic,
                                          bool synthetic_joins,
                                          const std::vector<RealRun>& real);

// What the choice between two fits weighs on one population of runs: the shares of its
// completed runs an upper bound keeps safe, and safe and tight; and how many of its
// out-of-memory runs it puts above the card.
struct Shares {
  double safe = 1, safe_and_tight = 1;
  int oom_above_card = 0;
};

// The shares of upper_mib (one per run, in order) on runs, judged as the fits are made:
// without the runs holding a transient. Shares of no completed run are 1.
Shares SharesOf(const std::vector<RealRun>& runs, const std::vector<double>& upper_mib,
                double card_mib);

// Whether the candidate fit serves in place of the incumbent: where the incumbent keeps
// fewer than safe_quantile of the runs safe, or where the candidate keeps safe_quantile
// safe, more of them safe and tight, and as many out-of-memory runs above the card.
bool CandidateServes(const Shares& incumbent, const Shares& candidate,
                     double safe_quantile);

}  // namespace gpuest::calibration
