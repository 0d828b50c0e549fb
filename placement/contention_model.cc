#include "placement/contention_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/text_file.h"

namespace gpuest {
namespace {

constexpr int kGridSteps = 4;  // The interval searches a 5 x 5 grid of the ranges.

double Clamp01(double v) { return std::min(1.0, std::max(0.0, v)); }

absl::Status Missing(const std::string& file, const std::string& key,
                     const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": key '", key, "' ", what));
}

absl::StatusOr<double> NumberAt(const nlohmann::ordered_json& json, const char* key,
                                const std::string& file) {
  if (!json.contains(key)) return Missing(file, key, "is missing");
  if (!json[key].is_number()) return Missing(file, key, "is not a number");
  const double v = json[key].get<double>();
  if (!std::isfinite(v)) return Missing(file, key, "is not finite");
  return v;
}

}  // namespace

const std::vector<std::string>& ContentionFeatureNames() {
  static const std::vector<std::string> names = {
      "bias", "self_util", "other_util", "self_util_x_other_util",
      "overload (max(0, self_util + other_util - 1))"};
  return names;
}

std::vector<double> ContentionFeatures(double self_util, double other_util) {
  return {1.0, self_util, other_util, self_util * other_util,
          std::max(0.0, self_util + other_util - 1.0)};
}

double ContentionModel::LinearSpeed(double self_util, double other_util) const {
  const std::vector<double> x = ContentionFeatures(self_util, other_util);
  double y = 0;
  for (size_t i = 0; i < x.size() && i < coefficients.size(); ++i)
    y += x[i] * coefficients[i];
  return y;
}

double ContentionModel::PointSpeed(double self_util, double other_util) const {
  return Clamp01(LinearSpeed(self_util, other_util));
}

double ContentionModel::BadProbability(double u) const {
  if (!HasVerdictHead()) return Clamp01(u) < bad_threshold ? 1.0 : 0.0;
  return 1.0 / (1.0 + std::exp(-(verdict_intercept + verdict_slope * u)));
}

bool ContentionModel::CalledBad(const SpeedPrediction& p) const {
  return HasVerdictHead() ? p.bad_probability >= verdict_probability
                          : p.speed < bad_threshold;
}

SpeedPrediction ContentionModel::Predict(
    const UtilizationRange& self, const std::vector<UtilizationRange>& others) const {
  SpeedPrediction p;
  if (others.empty()) return p;  // Alone: its own speed.
  UtilizationRange other;
  for (const UtilizationRange& o : others) {
    other.value += o.value;
    other.low += o.low;
    other.high += o.high;
  }
  other = {std::min(1.0, other.value), std::min(1.0, other.low),
           std::min(1.0, other.high)};
  p.extrapolated = others.size() > 1;
  p.speed = PointSpeed(self.value, other.value);
  p.bad_probability = BadProbability(LinearSpeed(self.value, other.value));
  double lo = p.speed, hi = p.speed;
  for (int i = 0; i <= kGridSteps; ++i) {
    const double s = self.low + (self.high - self.low) * i / kGridSteps;
    for (int j = 0; j <= kGridSteps; ++j) {
      const double o = other.low + (other.high - other.low) * j / kGridSteps;
      const double v = PointSpeed(s, o);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  p.low = Clamp01(lo + residual_low);
  p.high = std::max(0.0, hi + residual_high);
  return p;
}

double ContentionModel::SmactToUtil(double smact) const {
  return Clamp01(smact_intercept + smact_slope * smact);
}

nlohmann::ordered_json ContentionModel::ToJson() const {
  nlohmann::ordered_json j;
  j["version"] = version;
  j["features"] = ContentionFeatureNames();
  j["coefficients"] = coefficients;
  j["residual_low"] = residual_low;
  j["residual_high"] = residual_high;
  j["interval_coverage"] = interval_coverage;
  j["bad_threshold"] = bad_threshold;
  if (HasVerdictHead()) {
    j["verdict"] = {{"link", "logistic of the linear prediction before clipping"},
                    {"intercept", verdict_intercept},
                    {"slope", verdict_slope},
                    {"operating_probability", verdict_probability}};
  }
  j["smact_to_util"] = {
      {"intercept", smact_intercept}, {"slope", smact_slope}, {"mae", smact_mae}};
  for (const auto& [key, value] : extra.items()) j[key] = value;
  return j;
}

absl::StatusOr<ContentionModel> ContentionModel::FromJson(
    const nlohmann::ordered_json& json, const std::string& file) {
  if (!json.is_object()) return absl::InvalidArgumentError(file + ": not a JSON object");
  ContentionModel m;
  if (!json.contains("version") || !json["version"].is_string())
    return Missing(file, "version", "is missing or not a string");
  m.version = json["version"].get<std::string>();
  if (!json.contains("features") || json["features"] != ContentionFeatureNames()) {
    return Missing(file, "features",
                   "does not list this server's contention features (refit the model)");
  }
  if (!json.contains("coefficients") || !json["coefficients"].is_array() ||
      json["coefficients"].size() != ContentionFeatureNames().size()) {
    return Missing(file, "coefficients", "is not one number per feature");
  }
  for (const auto& c : json["coefficients"]) {
    if (!c.is_number() || !std::isfinite(c.get<double>()))
      return Missing(file, "coefficients", "holds a value that is not a finite number");
    m.coefficients.push_back(c.get<double>());
  }
  GPUEST_ASSIGN_OR_RETURN(m.residual_low, NumberAt(json, "residual_low", file));
  GPUEST_ASSIGN_OR_RETURN(m.residual_high, NumberAt(json, "residual_high", file));
  if (m.residual_low > m.residual_high)
    return Missing(file, "residual_low", "is above residual_high");
  GPUEST_ASSIGN_OR_RETURN(m.interval_coverage, NumberAt(json, "interval_coverage", file));
  GPUEST_ASSIGN_OR_RETURN(m.bad_threshold, NumberAt(json, "bad_threshold", file));
  if (json.contains("verdict")) {
    const auto& v = json["verdict"];
    if (!v.is_object()) return Missing(file, "verdict", "is not an object");
    GPUEST_ASSIGN_OR_RETURN(m.verdict_intercept, NumberAt(v, "intercept", file));
    GPUEST_ASSIGN_OR_RETURN(m.verdict_slope, NumberAt(v, "slope", file));
    GPUEST_ASSIGN_OR_RETURN(m.verdict_probability,
                            NumberAt(v, "operating_probability", file));
    if (m.verdict_slope == 0 || m.verdict_probability <= 0 || m.verdict_probability >= 1)
      return Missing(file, "verdict",
                     "needs a slope and an operating probability in (0, 1)");
  }
  if (!json.contains("smact_to_util") || !json["smact_to_util"].is_object())
    return Missing(file, "smact_to_util", "is missing");
  GPUEST_ASSIGN_OR_RETURN(m.smact_intercept,
                          NumberAt(json["smact_to_util"], "intercept", file));
  GPUEST_ASSIGN_OR_RETURN(m.smact_slope, NumberAt(json["smact_to_util"], "slope", file));
  GPUEST_ASSIGN_OR_RETURN(m.smact_mae, NumberAt(json["smact_to_util"], "mae", file));
  for (const auto& [key, value] : json.items()) {
    if (key != "version" && key != "features" && key != "coefficients" &&
        key != "residual_low" && key != "residual_high" && key != "interval_coverage" &&
        key != "bad_threshold" && key != "smact_to_util" && key != "verdict") {
      m.extra[key] = value;
    }
  }
  return m;
}

absl::StatusOr<ContentionModel> ContentionModel::Parse(const std::string& text,
                                                       const std::string& file) {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(text, nullptr, false);
  if (json.is_discarded())
    return absl::InvalidArgumentError(absl::StrCat(file, ": not valid JSON"));
  return FromJson(json, file);
}

absl::StatusOr<ContentionModel> ContentionModel::Load(const std::string& path) {
  GPUEST_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path));
  return Parse(text, path);
}

}  // namespace gpuest
