// File: contention_model.h
//
// How much two training jobs on one GPU slow each other down, from each job's
// utilization alone (utilization.gpu on nvidia-smi's scale, as a fraction 0..1). A
// linear model over a few features of the pair (contention_features), fitted by least
// squares on Lucid's measured pairs (training/contention, gpuest-fit-contention) and
// validated leaving whole models out; the interval is the held-out residuals'
// quantiles. Read from models/contention/contention.json; one type reads and writes it.
//
// More than one other job: the others are folded into one job whose utilization is the
// sum of theirs, capped at 1. The data has pairs only, so this is an extrapolation and
// the prediction says so.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimators/model_repository.h"  // ContentionModelPath: where it is kept.
#include "nlohmann/json.hpp"

namespace gpuest {

// A job's utilization.gpu as a fraction, with the range it may lie in (equal to value
// for a measurement taken as exact).
struct UtilizationRange {
  double value = 0;
  double low = 0;
  double high = 0;
};

// The pair's features, in the order of ContentionModel::coefficients. One definition
// for the fitter and the server.
std::vector<double> ContentionFeatures(double self_util, double other_util);
// Their names, for the file and the docs.
const std::vector<std::string>& ContentionFeatureNames();

struct SpeedPrediction {
  double speed = 1;  // Fraction of the job's speed alone, clipped to [0, 1].
  double low = 1;
  double high = 1;
  bool extrapolated = false;  // Beside more than one other job.
};

struct ContentionModel {
  std::string version;
  std::vector<double> coefficients;  // One per ContentionFeatureNames().
  // Held-out (leave-model-out) residual quantiles, measured - predicted: the interval
  // is [prediction + residual_low, prediction + residual_high].
  double residual_low = 0;
  double residual_high = 0;
  double interval_coverage = 0;  // The nominal coverage of those quantiles (0.9).
  // Below this predicted speed a job is badly placed (Lucid's 0.85).
  double bad_threshold = 0.85;
  // DCGM SMACT -> utilization.gpu (fractions): util = intercept + slope * smact.
  double smact_intercept = 0;
  double smact_slope = 1;
  // The map's mean absolute error on its rows: a SMACT reading's range is +- this.
  double smact_mae = 0;
  // Everything else of the file (validation table, provenance), kept for writing.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();

  // The point prediction at exact utilizations, clipped to [0, 1].
  double PointSpeed(double self_util, double other_util) const;
  // Self beside others (one or more): the point at the values, the interval over the
  // ranges' extremes widened by the residual quantiles.
  SpeedPrediction Predict(const UtilizationRange& self,
                          const std::vector<UtilizationRange>& others) const;
  // SMACT (0..1) on utilization.gpu's scale (0..1), clamped.
  double SmactToUtil(double smact) const;

  nlohmann::ordered_json ToJson() const;
  // InvalidArgument names the file and the key.
  static absl::StatusOr<ContentionModel> FromJson(const nlohmann::ordered_json& json,
                                                  const std::string& file);
  // The file's text, as read (the model repository reads it); file names it in errors.
  static absl::StatusOr<ContentionModel> Parse(const std::string& text,
                                               const std::string& file);
  static absl::StatusOr<ContentionModel> Load(const std::string& path);
};

}  // namespace gpuest
