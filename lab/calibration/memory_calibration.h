// File: memory_calibration.h
//
// What gpuest-calibrate-memory does, as one call: calibrates the two simulation
// estimators (allocsim: the request's trace; analytic: a step built from the layers) on
// GPUMemNet's training split, optionally writes them into the model repository, and
// scores the served estimators, beside GPUMemNet's MLP-based classifiers and the Horus
// formula, on GPUMemNet's held-out split.
//
// Calibration (calibration.h, on training rows only):
// - the A100's context: the median of measured - simulated peak over the MLP rows
//   (their allocations are the best understood), written to gpu_profiles.json;
// - per family and estimator, an intercept from a grid; for each, safe_factor is the
//   smallest factor keeping safe_quantile of the rows at or above their measured peak,
//   point_factor the median one. The intercept with the most safe-and-tight training
//   rows wins;
// - with real models (timm_rows), for the families they cover, an out-of-group fit:
//   the point fitted on both datasets, the upper bound from its errors on
//   architecture groups left out. It is served where the fit on GPUMemNet alone keeps
//   fewer than safe_quantile of the real rows safe, or where it is safe enough and
//   tighter on them (RealModelFit::kWhereUnsafeOrTighter).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuest::calibration {

enum class RealModelFit {
  kNever,        // GPUMemNet's training rows alone, everywhere.
  kWhereUnsafe,  // Where GPUMemNet's fit leaves more than 1 - safe_quantile of the
                 // real rows unsafe.
  // Also where the out-of-group fit keeps safe_quantile of the real rows safe (each
  // scored by fits that never saw its architecture group), more of them safe and
  // tight than GPUMemNet's fit, and as many of their out-of-memory runs above the card.
  kWhereUnsafeOrTighter,
  kAlways,  // Every family the real rows cover.
};

struct MemoryCalibrationOptions {
  std::string data_dir;      // GPUMemNet's CSVs.
  std::string datasets_dir;  // The exporter's <family>_traced.jsonl, transformer.jsonl.
  std::string models_dir;    // The model repository read (and written).
  // Write models/allocsim, models/analytic and the A100's context in gpu_profiles.json.
  bool write_models = false;
  // Score the simulation manifests in models_dir as they are (the shipped models) in
  // place of this run's fits, which the report then shows only for comparison: the
  // report describes what is served even where the shipped terms were fitted on
  // inputs this machine does not have. Not with write_models.
  bool score_models = false;
  int steps = 2;  // Training steps replayed.
  double safe_quantile = 0.95;
  uint64_t seed = 2025;  // GPUMemNet's split.
  double test_fraction = 0.3;
  // Non-empty: the training rows' simulated and measured peaks as CSV, for study.
  std::string training_rows_csv;
  // Non-empty, with timm_rows: each real row as scored (status, measured and simulated
  // peaks, the served upper bounds, the trace's evidence of a transient) as CSV.
  std::string real_rows_csv;
  // Non-empty: "GPU=FILE", clean runs measured on that GPU (cuDNN benchmark off,
  // uncapped; lab/data/export_clean_runs.py) that calibrate its own terms
  // (clean_runs.h), written into the manifests' by_gpu and reported.
  std::string gpu_runs;
  // With gpu_runs: its terms serve every GPU for the families they calibrate (the
  // requirement is fitted on clean runs only); false: that GPU only (by_gpu).
  bool clean_terms_for_every_gpu = true;
  // "GPU=FILE" of clean runs no fit sees (exported as gpu_runs are), for the bound's
  // goal table (bound_goals.h), the GPU's context chosen as the server chooses it.
  std::vector<std::string> holdout_runs;
  // Non-empty: the timm measurements described with a trace
  // (lab/data/describe_timm.py). The report gains their leave-architecture-group-out
  // table: the served calibration and the candidate it was chosen over: the
  // out-of-group fit (calibration.h FitOutOfGroup: GPUMemNet's training rows and the
  // real rows of the family, the upper bound from the point's errors on architecture
  // groups left out of the fit).
  std::string timm_rows;
  // Which families serve (and write) the out-of-group fit.
  RealModelFit fit_real_models = RealModelFit::kWhereUnsafeOrTighter;
  // The CNN out-of-group fit's conv term: factors of the largest convolution output
  // tried up to this (calibration.h FitOptions::max_conv_factor); 0 leaves it out.
  double max_conv_output_factor = 12;
};

// The report's section (simulation_report.h). Progress goes to stderr.
absl::StatusOr<std::string> CalibrateMemory(const MemoryCalibrationOptions& options);

}  // namespace gpuest::calibration
