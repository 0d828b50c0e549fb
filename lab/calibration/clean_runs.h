// File: clean_runs.h
//
// A GPU's own calibration from clean runs measured on it: cuDNN benchmark mode off and
// no cap, so the allocator's reserved peak is the training step's, with no search
// transient in it: the requirement (data/h200-benchmark-off/). The runs come as the
// exporter's JSON lines (lab/data/export_clean_runs.py: peak = reserved peak + the
// GPU's context). Per model family, calibration.h's out-of-group fit over the runs
// grouped by architecture group, its margin's quantile chosen for coverage of
// groups left out (FitOptions::group_coverage), gives the terms served for that GPU,
// and each run's bound from fits that never saw its architecture group, which the
// report scores.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimators/allocsim/simulation_manifest.h"
#include "estimators/core/gpu_profiles.h"
#include "lab/calibration/calibration.h"

namespace gpuest::calibration {

struct CleanRunsFamily {
  std::string family;  // "cnn"
  int runs = 0;
  int architecture_groups = 0;
  allocsim::FamilyCalibration calibration;  // Fitted on every run.
  double margin_quantile = 0;               // The upper bound's, as chosen.
  // Each run by a fit without its architecture group.
  Scores upper;
  Scores point;
  // The calibrated GPU's terms (fitted on none of these runs) on the same runs.
  Scores calibrated_upper, calibrated_point;
  // Served for this GPU: the own fit keeps safe_quantile of the runs safe out of group
  // and more of them safe and tight than the calibrated GPU's terms, or those keep
  // fewer than safe_quantile safe (the rule of the real models' fits,
  // memory_calibration.h).
  bool served = false;
};

struct CleanRunsCalibration {
  std::string gpu;  // Its profile id.
  double context_mib = 0;
  std::string file, sha256;  // The runs.
  // Simulation id -> its families, in name order.
  std::map<std::string, std::vector<CleanRunsFamily>> by_simulation;
};

// Simulation id -> family name -> the calibrated GPU's terms.
using CalibratedTerms =
    std::map<std::string, std::map<std::string, allocsim::FamilyCalibration>>;

// A model family whose runs are all of one architecture group is left out (said on
// stderr); InvalidArgument when no model family is left to calibrate.
// cnn_max_conv_factor: the CNN bound's cuDNN workspace term, as for the real models.
absl::StatusOr<CleanRunsCalibration> CalibrateOnCleanRuns(
    const std::string& runs_file, const core::GpuProfile& gpu, int steps,
    FitOptions options, double cnn_max_conv_factor, const CalibratedTerms& calibrated);

// The family's clean-run fit for simulation id, or nullptr.
const CleanRunsFamily* CleanFamilyOf(const CleanRunsCalibration& c, const std::string& id,
                                     const std::string& family);

// A simulation's served terms for the manifest (SimulationManifest::by_gpu), scores
// rounded as the report shows them; none when no family's own fit is served.
std::optional<allocsim::GpuTerms> GpuTermsOf(const CleanRunsCalibration& c,
                                             const std::string& id,
                                             const std::string& made_by);

// Markdown: the out-of-group scores per simulation and family.
// calibrated_gpu: the GPU whose terms are served elsewhere ("a100-40gb").
// scored_shipped: the report scores the shipped manifests (--score-models), so the
// `served` column is what this run's rule would choose, not what is served.
std::string RenderCleanRunsSection(const CleanRunsCalibration& c,
                                   const std::string& calibrated_gpu,
                                   double safe_quantile, bool scored_shipped = false);

}  // namespace gpuest::calibration
