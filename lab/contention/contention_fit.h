// File: contention_fit.h
//
// Fits the contention model (placement/contention_model.h) on Lucid's colocation
// measurements and validates it leaving whole models out: for each model, every pair
// that involves it is held out, the rest fit, and the held-out jobs predicted. Also
// scores two rules a scheduler would otherwise use on the same folds, and fits the DCGM
// SMACT -> utilization.gpu map on GPUMemNet's rows that measured both.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/contention_model.h"

namespace gpuest::contention {

// One job of a measured pair, from the self job's point of view.
struct PairSample {
  std::string self_model;  // Lucid's model name ("ResNet18"): the fold key.
  std::string other_model;
  double self_util = 0;  // utilization.gpu alone, fraction.
  double other_util = 0;
  double speed = 0;  // Measured speed beside the other / speed alone.
  int pair = 0;      // Index of the colocation row.
};

struct LucidData {
  std::vector<PairSample> samples;  // Two per joined pair.
  int pairs = 0;
  int joined = 0;  // Pairs whose two jobs are both in single.csv.
  int single_rows = 0;
  std::vector<std::string> models;  // Sorted.
  std::string single_sha256, colocation_sha256;
};

// Joins colocation.csv to single.csv by (model, dataset, batchsize, amp).
// InvalidArgument names the file and row.
absl::StatusOr<LucidData> ReadLucid(const std::string& dir);

// Least squares of y on the rows of x, with a ridge of `ridge` on every weight but the
// first (the bias): the normal equations, solved by LAPACK through libtorch
// (least_squares.cc). FailedPrecondition for a singular system.
absl::StatusOr<std::vector<double>> LeastSquares(
    const std::vector<std::vector<double>>& x, const std::vector<double>& y,
    double ridge);

// One rule's leave-model-out scores.
struct RuleScores {
  std::string rule;
  double speed_mae = 0;      // Over every held-out job.
  double job_accuracy = 0;   // Verdict "this job runs below 0.85" per job.
  double pair_accuracy = 0;  // Verdict "this pair is bad" (either job below 0.85).
  double bad_recall = 0;     // Share of the truly bad pairs called bad.
  double bad_precision = 0;  // Share of the pairs called bad that are.
};

// The verdict head's precision and recall for bad pairs at one operating probability,
// leaving models out.
struct OperatingPoint {
  double probability = 0;
  double precision = 0;
  double recall = 0;
};

struct FitResult {
  placement::ContentionModel model;
  std::vector<RuleScores> table;              // The model first, then the baselines.
  double interval_coverage_cross_fitted = 0;  // Per fold, quantiles from the others.
  // The served interval's level (raised until the cross-fit covers the nominal
  // coverage) and the coverage of held-out jobs when each fold's level and quantiles
  // come from the other folds only.
  double interval_level = 0;
  double interval_coverage_level_adjusted = 0;
  std::vector<OperatingPoint> pr_curve;  // The verdict head's, leaving models out.
  double smact_mae = 0;  // Of the SMACT map on its rows, utilization.gpu fraction.
  int smact_rows = 0;
};

struct FitOptions {
  std::string lucid_dir;
  std::string gpumemnet_dir;
  double ridge = 1e-3;
  double bad_threshold = 0.85;
  double interval_coverage = 0.9;
  // The verdict head's operating point: the most bad pairs found at this pair
  // precision or more.
  double min_pair_precision = 0.75;
  std::string command;  // As run, for the provenance.
};

absl::StatusOr<FitResult> FitContention(const FitOptions& options);

// The report's table in Markdown, then the verdict head's precision-recall curve.
std::string RenderTable(const FitResult& result);

// Logistic regression of y (0/1) on one variable u: {intercept, slope}, by Newton's
// method on the log-likelihood (a 2 x 2 system), with a small ridge on the slope.
std::pair<double, double> FitLogistic(const std::vector<double>& u,
                                      const std::vector<bool>& y);

}  // namespace gpuest::contention
