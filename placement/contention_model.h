// File: contention_model.h
//
// How much two training jobs on one GPU slow each other down, from each job's
// utilization alone (utilization.gpu on nvidia-smi's scale, as a fraction 0..1). A
// linear model over a few features of the pair (contention_features), fitted by least
// squares on Lucid's measured pairs (lab/contention, gpuest-fit-contention) and
// validated leaving whole models out; the interval is the held-out residuals'
// quantiles. Read from models/contention/contention.json; one type reads and writes it.
//
// More than one other job: the others are folded into one job whose utilization is the
// sum of theirs, capped at 1. The data has pairs only, so this is an extrapolation and
// the prediction says so.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "estimators/core/model_repository.h"  // ContentionModelPath: where it is kept.
#include "nlohmann/json.hpp"

namespace gpuest::placement {

// A job's utilization.gpu as a fraction, with the range it may lie in (equal to value
// for a measurement taken as exact).
struct UtilizationRange {
  double value = 0;
  double low = 0;
  double high = 0;
};

// The pair's features, in the order of ContentionModel::coefficients. One definition
// for the fitter and the server (an array: a placement evaluates it per GPU).
using ContentionFeatureValues = std::array<double, 5>;
ContentionFeatureValues ContentionFeatures(double self_util, double other_util);
// Their names, for the file and the docs.
const std::vector<std::string>& ContentionFeatureNames();

struct SpeedPrediction {
  double speed = 1;  // Fraction of the job's speed alone, clipped to [0, 1].
  // The interval: low clipped at 0; high not at 1 (a quarter of Lucid's jobs ran faster
  // beside another job than alone, within their measurement's noise).
  double low = 1;
  double high = 1;
  // The probability that the job runs below bad_threshold of its speed alone (the
  // verdict head), or 1/0 from the point speed for a model without one.
  double bad_probability = 0;
  bool extrapolated = false;  // Beside more than one other job.
};

// Jobs beside one as a single load: their utilizations summed, each bound capped at 1
// (the model was fitted on pairs; more jobs are one load, an extrapolation).
UtilizationRange CombinedLoad(absl::Span<const UtilizationRange> others);

struct ContentionModel {
  std::string version;
  std::vector<double> coefficients;  // One per ContentionFeatureNames().
  // Held-out (leave-model-out) residual quantiles, measured - predicted: the interval
  // is [prediction + residual_low, prediction + residual_high].
  double residual_low = 0;
  double residual_high = 0;
  double interval_coverage = 0;  // The nominal coverage of those quantiles (0.9).
  // Below this speed a job is badly placed (Lucid's 0.85).
  double bad_threshold = 0.85;
  // The verdict head: P(speed < bad_threshold) = 1 / (1 + exp(-(verdict_intercept +
  // verdict_slope * u))), u the linear prediction before clipping, fitted by logistic
  // regression on Lucid's jobs; a job is called bad at verdict_probability or above,
  // the operating point chosen leaving models out (the most bad pairs found at a pair
  // precision of 0.75 or more). A file without it (verdict_slope 0) calls a job bad
  // when its point speed is below bad_threshold.
  double verdict_intercept = 0;
  double verdict_slope = 0;
  double verdict_probability = 0.5;
  // DCGM SMACT -> utilization.gpu (fractions): util = intercept + slope * smact.
  double smact_intercept = 0;
  double smact_slope = 1;
  // The map's mean absolute error on its rows: a SMACT reading's range is +- this.
  double smact_mae = 0;
  // The fitter's provenance ("validation", "manifest"), kept for writing.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();

  // The point prediction at exact utilizations, clipped to [0, 1], and before clipping.
  double PointSpeed(double self_util, double other_util) const;
  double LinearSpeed(double self_util, double other_util) const;
  // The verdict head's probability for a linear prediction u.
  double BadProbability(double u) const;
  bool HasVerdictHead() const { return verdict_slope != 0; }
  // Whether a prediction is called bad: by the verdict head where there is one.
  bool CalledBad(const SpeedPrediction& p) const;
  // Self beside others (one or more): the point at the values, the interval over the
  // ranges' extremes widened by the residual quantiles. Alone (no others): speed 1.
  SpeedPrediction Predict(const UtilizationRange& self,
                          absl::Span<const UtilizationRange> others) const;
  // The point and the verdict head's probability only, beside the others' combined
  // load (CombinedLoad): what a placement's verdict reads, without the interval's grid.
  // Predict's point is this.
  SpeedPrediction PredictPoint(const UtilizationRange& self,
                               const UtilizationRange& load) const;
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

}  // namespace gpuest::placement
