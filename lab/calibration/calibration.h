// File: calibration.h
//
// The simulation estimators' calibration (allocsim, analytic) and the scoring of any
// memory estimate against measured peaks: the library behind gpuest-calibrate-memory.
// The fit uses allocsim::CalibratedEstimate, the arithmetic the server answers with,
// so a calibration is judged by exactly the figures it will serve.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimators/allocsim/memory_model.h"
#include "estimators/allocsim/simulation_manifest.h"
#include "estimators/allocsim/trace_replay.h"
#include "estimators/core/gpu_profiles.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::calibration {

// An estimate is safe when it is at least the measured peak (the job does not crash
// for want of the memory reserved), tight when also at most kTightFactor x measured.
inline constexpr double kTightFactor = 1.2;
bool Safe(double estimate_mib, double measured_mib);
bool SafeAndTight(double estimate_mib, double measured_mib);

// One estimate of a run that did not crash out of memory, and its measured peak (> 0).
struct Scored {
  double estimate_mib = 0;
  double measured_mib = 0;
};

struct Scores {
  int n = 0;
  double mape = 0;  // Mean absolute percentage error, in percent.
  double p50_abs_error_mib =
      0;  // Quantiles (common/quantile.h) of |estimate - measured|.
  double p90_abs_error_mib = 0;
  double safe = 0;            // Share of the rows that are safe,
  double safe_and_tight = 0;  // and safe and tight.
};

// All zero for no rows.
Scores Score(const std::vector<Scored>& rows);

// As a simulation manifest records them: factors to 4 decimals; scores to the report's
// precision (MAPE to 0.1 %, shares to 0.001).
allocsim::FamilyCalibration AsRecorded(allocsim::FamilyCalibration c);
allocsim::HeldOutScores AsRecorded(const Scores& s);

// A training row of the calibration: what the simulation made of the run, and the
// peak it measured (a run that did not crash out of memory, peak > 0).
struct CalibrationRow {
  allocsim::ReplayResult replay;
  double measured_mib = 0;
  // allocsim::LargestConvOutputMib of the run: what the upper's conv term multiplies.
  double conv_output_mib = 0;
};

struct FitOptions {
  // Share of the rows the upper bound keeps safe.
  double safe_quantile = 0.95;
  // The intercepts tried: 0, step, 2 x step, ... up to max.
  double intercept_step_mib = 25;
  double max_intercept_mib = 4000;
  // The out-of-group upper bound's conv term (FamilyCalibration::conv_output_factor):
  // the factors tried, 0, step, ... up to max; max 0 leaves the term out.
  double conv_factor_step = 0.5;
  double max_conv_factor = 0;
  // FitOutOfGroup only. 0: the upper bound's margin keeps safe_quantile of each
  // dataset's rows safe. Above 0: the margin's quantile is chosen per left-out group by
  // leave-one-group-out over the other groups alone: the smallest of
  // kCoverageQuantiles whose out-of-group safe share reaches this target. A margin fitted
  // to keep 95 % of the rows safe in sample keeps fewer safe on groups it never saw
  // (errors cluster by architecture group); this chooses it on groups it did not see,
  // and never on the group scored.
  double group_coverage = 0;
};

// The margin quantiles FitOptions::group_coverage chooses among, none below
// safe_quantile's default: coverage of unseen architecture groups may widen the margin,
// never narrow it below what keeps 95 % of the rows safe in sample.
inline constexpr double kCoverageQuantiles[] = {0.95, 0.96, 0.97, 0.98, 0.99, 1.0};

// A family's calibration on gpu (its context already calibrated). For each intercept b
// of the grid, the factor each row needs for context + b + k x simulated to reach its
// measured peak; k_safe is the safe_quantile of those (at least 1), k_point their
// median (at least 0.05). The upper bound's (b, k_safe) is the one with the most
// safe-and-tight rows (the smallest b on a tie); the point's (b, k_point) the one with
// the least mean absolute percentage error. InvalidArgument for no rows.
absl::StatusOr<allocsim::FamilyCalibration> FitFamilyCalibration(
    const std::vector<CalibrationRow>& rows, const core::GpuProfile& gpu,
    const FitOptions& options);

// The point estimate's terms: point = context + intercept + factor x simulated peak.
struct PointTerms {
  double intercept_mib = 0;
  double factor = 1;
};

// For each intercept of the grid, the factor is the median of what each row needs
// (at least 0.05); the pair with the least mean absolute percentage error wins (the
// smallest intercept on a tie). InvalidArgument for no rows.
absl::StatusOr<PointTerms> FitPointTerms(const std::vector<CalibrationRow>& rows,
                                         double context_mib, const FitOptions& options);

// A calibration row with the group it is left out with: a real model's architecture
// group (timm's "resnet", "convnext", ...), or one group for a whole synthetic
// dataset; and the dataset it belongs to, each of which the bound keeps safe on its own.
struct GroupedRow {
  std::string group;
  CalibrationRow row;
  // False for a run that crashed out of memory: predicted, never fitted on.
  bool measured = true;
  std::string dataset;
};

// A calibration for architectures nobody measured. Each row's point (context + b +
// k x simulated, FitPointTerms) is fitted without its own group; the upper bound is
// context + slack + margin x (point - context) + conv x the row's largest convolution
// output, the (slack, conv) of the grids, margin keeping safe_quantile of every
// dataset's rows safe, with the most safe-and-tight rows. So the bound comes from the
// point's errors on architecture groups the fit never saw.
struct OutOfGroupFit {
  // As served: the point terms fitted on every row, the upper terms
  // (slack + margin x b, margin x k) from every row's out-of-group error.
  allocsim::FamilyCalibration calibration;
  double slack_mib = 0;
  double margin = 1;
  double conv_output_factor = 0;
  // The margin's quantile: FitOptions::safe_quantile, or the one group_coverage chose.
  double margin_quantile = 0;
  // Per row, in input order: its point and upper bound from fits that never saw its
  // group (the upper's terms from the other groups' errors only): what the report
  // scores.
  std::vector<double> point_mib;
  std::vector<double> upper_mib;
};

// InvalidArgument for fewer than two groups.
absl::StatusOr<OutOfGroupFit> FitOutOfGroup(const std::vector<GroupedRow>& rows,
                                            const core::GpuProfile& gpu,
                                            const FitOptions& options);

// The leading letters of a timm model name, its architecture group: "resnet50d" ->
// "resnet", "vit_base_patch16_224" -> "vit".
std::string ArchitectureGroupOf(const std::string& model_name);

// A GPU's context: the median (rounded to a MiB) of measured - simulated peak
// reserved, over rows whose allocations the simulation explains best (the MLP rows).
// InvalidArgument for no rows.
absl::StatusOr<double> FitContextMib(const std::vector<CalibrationRow>& rows);

}  // namespace gpuest::calibration
