// File: bound_goals.h
//
// The served bound against the goals of the "bound" issue, on runs no fit saw, in one
// table of docs/accuracy.md:
//   - held-out clean runs on a GPU whose constants are measured (image models and
//     language models apart): safe >= 95 %, within 1.2x >= 90 %, point MAPE <= 5 %;
//   - the same runs as if that GPU's constants were assumed (its own measured
//     contexts removed: it borrows the other GPUs', with the margin): safe >= 95 %,
//     within 1.2x >= 80 %;
//   - the leave-architecture-group-out splits of the clean runs the terms are fitted on;
//   - out-of-memory rows: the bound above the card on >= 98 %;
//   - the A100's benchmark-on rows, whose peaks hold the workspace the search chose:
//     bound >= measured / 1.15 on >= 95 %, and within 1.2x of the measured on >= 80 %.
// Each row is estimated by the served estimator, as the server would answer it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimators/core/estimator.h"
#include "estimators/core/gpu_profiles.h"
#include "lab/calibration/calibration.h"
#include "lab/data/measured_rows.h"

namespace gpuest::calibration {

// A measured run as the goals read it: its peak, the bound and point estimated for it.
struct GoalRun {
  std::string name;  // For the runs the bound misses.
  double measured_mib = 0;
  double upper_mib = 0;
  double point_mib = 0;
  bool oom = false;
};

struct GoalRow {
  std::string population;  // "H100 (h100-80gb), constants measured: image models"
  int runs = 0;
  double safe = 0;    // Bound >= measured (or, with allowance, >= measured / 1.15).
  double within = 0;  // Safe and bound <= 1.2 x measured.
  double point_mape = 0;
  double safe_goal = 0, within_goal = 0, mape_goal = 0;  // 0: no goal.
  // The completed runs the bound misses, "name (0.97x)", the most missed first (at
  // most five named).
  std::string short_runs;
  bool met() const;
};

// Scores runs: allowance divides the measured peak for the safe test (1.15 for peaks
// holding benchmark mode's search); OOM runs count for safe when the bound exceeds
// the card.
GoalRow ScoreGoalRuns(const std::string& population, const std::vector<GoalRun>& runs,
                      double allowance, double card_mib);

struct HoldoutFile {
  std::string gpu;   // Its profile id.
  std::string path;  // Exported rows (lab/data/export_clean_runs.py).
};

struct GoalInputs {
  // Simulation id -> the estimator as served (built from the manifests written).
  const std::map<std::string, std::unique_ptr<core::Estimator>>* served = nullptr;
  const core::GpuProfiles* gpus = nullptr;
  const core::GpuProfile* calibrated_gpu = nullptr;  // The A100 40GB, its context fitted.
  std::vector<HoldoutFile> holdout;
  // The A100's real-model rows (benchmark on), as the calibration read them; null: none.
  const data::MeasuredFile* timm = nullptr;
  // Id -> the clean runs' leave-architecture-group-out rows already scored
  // (clean_runs.h).
  std::vector<GoalRow> clean_splits;
};

// The table, with how each row was made; InvalidArgument names a file or GPU.
absl::StatusOr<std::string> RenderBoundGoals(const GoalInputs& in);

}  // namespace gpuest::calibration
