#include "placement/contention_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/strict_json.h"
#include "common/text_file.h"

namespace gpuest::placement {
namespace {

constexpr int kGridSteps = 4;  // The interval searches a 5 x 5 grid of the ranges.

double Clamp01(double v) { return std::min(1.0, std::max(0.0, v)); }

using Fields = common::strict_json::Fields<nlohmann::ordered_json>;

// A number that must be finite: the model's arithmetic has no use for inf or NaN.
absl::Status FiniteAt(Fields& f, const std::string& key, double& out) {
  GPUEST_RETURN_IF_ERROR(f.Get(key, out));
  if (!std::isfinite(out)) return f.Error(key, "is not finite");
  return absl::OkStatus();
}

// The fitter's provenance ("validation", "manifest"): objects kept as they are, for
// writing the file back; nothing reads inside them.
constexpr const char* kProvenanceKeys[] = {"validation", "manifest"};

}  // namespace

const std::vector<std::string>& ContentionFeatureNames() {
  static const std::vector<std::string> names = {
      "bias", "self_util", "other_util", "self_util_x_other_util",
      "overload (max(0, self_util + other_util - 1))"};
  return names;
}

ContentionFeatureValues ContentionFeatures(double self_util, double other_util) {
  return {1.0, self_util, other_util, self_util * other_util,
          std::max(0.0, self_util + other_util - 1.0)};
}

double ContentionModel::LinearSpeed(double self_util, double other_util) const {
  const ContentionFeatureValues x = ContentionFeatures(self_util, other_util);
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

UtilizationRange CombinedLoad(absl::Span<const UtilizationRange> others) {
  UtilizationRange load;
  for (const UtilizationRange& o : others) {
    load.value += o.value;
    load.low += o.low;
    load.high += o.high;
  }
  return {std::min(1.0, load.value), std::min(1.0, load.low), std::min(1.0, load.high)};
}

SpeedPrediction ContentionModel::PredictPoint(const UtilizationRange& self,
                                              const UtilizationRange& load) const {
  SpeedPrediction p;
  p.speed = PointSpeed(self.value, load.value);
  p.bad_probability = BadProbability(LinearSpeed(self.value, load.value));
  return p;
}

SpeedPrediction ContentionModel::Predict(
    const UtilizationRange& self, absl::Span<const UtilizationRange> others) const {
  if (others.empty()) return SpeedPrediction{};  // Alone: its own speed.
  const UtilizationRange other = CombinedLoad(others);
  SpeedPrediction p = PredictPoint(self, other);
  p.extrapolated = others.size() > 1;
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
  GPUEST_ASSIGN_OR_RETURN(Fields f, Fields::Of(json, file));
  ContentionModel m;
  GPUEST_RETURN_IF_ERROR(f.Get("version", m.version));
  std::vector<std::string> features;
  GPUEST_RETURN_IF_ERROR(f.Get("features", features));
  if (features != ContentionFeatureNames()) {
    return f.Error("features",
                   "does not list this server's contention features (refit the model)");
  }
  GPUEST_RETURN_IF_ERROR(f.Get("coefficients", m.coefficients));
  if (m.coefficients.size() != features.size()) {
    return f.Error("coefficients", "is not one number per feature");
  }
  for (double c : m.coefficients) {
    if (!std::isfinite(c)) {
      return f.Error("coefficients", "holds a value that is not a finite number");
    }
  }
  GPUEST_RETURN_IF_ERROR(FiniteAt(f, "residual_low", m.residual_low));
  GPUEST_RETURN_IF_ERROR(FiniteAt(f, "residual_high", m.residual_high));
  if (m.residual_low > m.residual_high) {
    return f.Error("residual_low", "is above residual_high");
  }
  GPUEST_RETURN_IF_ERROR(FiniteAt(f, "interval_coverage", m.interval_coverage));
  GPUEST_RETURN_IF_ERROR(FiniteAt(f, "bad_threshold", m.bad_threshold));
  if (f.Has("verdict")) {
    GPUEST_ASSIGN_OR_RETURN(Fields v, f.Object("verdict"));
    std::string link;
    GPUEST_RETURN_IF_ERROR(v.Get("link", link));
    GPUEST_RETURN_IF_ERROR(FiniteAt(v, "intercept", m.verdict_intercept));
    GPUEST_RETURN_IF_ERROR(FiniteAt(v, "slope", m.verdict_slope));
    GPUEST_RETURN_IF_ERROR(FiniteAt(v, "operating_probability", m.verdict_probability));
    GPUEST_RETURN_IF_ERROR(v.Finish());
    if (m.verdict_slope == 0 || m.verdict_probability <= 0 ||
        m.verdict_probability >= 1) {
      return v.Invalid("needs a slope and an operating probability in (0, 1)");
    }
  }
  GPUEST_ASSIGN_OR_RETURN(Fields smact, f.Object("smact_to_util"));
  GPUEST_RETURN_IF_ERROR(FiniteAt(smact, "intercept", m.smact_intercept));
  GPUEST_RETURN_IF_ERROR(FiniteAt(smact, "slope", m.smact_slope));
  GPUEST_RETURN_IF_ERROR(FiniteAt(smact, "mae", m.smact_mae));
  GPUEST_RETURN_IF_ERROR(smact.Finish());
  for (const char* key : kProvenanceKeys) {
    if (!f.Has(key)) continue;
    GPUEST_ASSIGN_OR_RETURN(const nlohmann::ordered_json* value, f.Value(key));
    if (!value->is_object()) return f.Error(key, "must be a JSON object");
    m.extra[key] = *value;
  }
  GPUEST_RETURN_IF_ERROR(f.Finish());
  return m;
}

absl::StatusOr<ContentionModel> ContentionModel::Parse(const std::string& text,
                                                       const std::string& file) {
  GPUEST_ASSIGN_OR_RETURN(const nlohmann::ordered_json json, Fields::Parse(text, file));
  return FromJson(json, file);
}

absl::StatusOr<ContentionModel> ContentionModel::Load(const std::string& path) {
  GPUEST_ASSIGN_OR_RETURN(const std::string text,
                          common::ReadTextFile(path, common::kMaxConfigFileBytes));
  return Parse(text, path);
}

}  // namespace gpuest::placement
