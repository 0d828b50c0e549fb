#include "estimators/gpumemnet/feature_encoding.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/model_family.h"
#include "common/status_macros.h"
#include "estimators/core/layer_types.h"

namespace gpuest::gpumemnet {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr char kUnknownToken[] = "<unknown>";

double Log1p(double x) { return std::log1p(std::max(0.0, x)); }

int64_t CountOf(const v1::FeatureVector& features,
                const std::vector<std::string>& types) {
  int64_t best = 0;
  for (const std::string& type : types) {
    auto it = features.layer_counts().find(type);
    if (it != features.layer_counts().end()) best = std::max(best, it->second);
  }
  return best;
}

// Index of the activation function in the list, -1 when absent (empty), -2 when
// present but not in the list.
int ActivationIndex(const EncodingSpec& spec, const std::string& activation) {
  if (activation.empty()) return -1;
  auto it = std::find(spec.activation_functions.begin(), spec.activation_functions.end(),
                      activation);
  if (it == spec.activation_functions.end()) return -2;
  return static_cast<int>(it - spec.activation_functions.begin());
}

double RawFeature(const EncodingSpec& spec, const FeatureSpec& f,
                  const v1::FeatureVector& v) {
  const std::string& s = f.source;
  if (s == "batch_size") return Log1p(static_cast<double>(v.batch_size()));
  if (s == "parameters") return Log1p(static_cast<double>(v.total_parameters()));
  if (s == "activations") return Log1p(static_cast<double>(v.total_activations()));
  if (s == "activations_x_batch") {
    return Log1p(static_cast<double>(v.total_activations()) *
                 static_cast<double>(v.batch_size()));
  }
  if (s == "depth") return Log1p(static_cast<double>(v.depth()));
  if (s == "sequence_length") return Log1p(static_cast<double>(v.sequence_length()));
  if (s == "count") return Log1p(static_cast<double>(CountOf(v, f.layer_types)));
  if (s == "activation_cos" || s == "activation_sin") {
    const int index = ActivationIndex(spec, v.activation_function());
    if (index < 0) return 0.0;
    const double angle =
        kPi * index / static_cast<double>(spec.activation_functions.size());
    return s == "activation_cos" ? std::cos(angle) : std::sin(angle);
  }
  return 0.0;
}

bool IsLog1p(const std::string& source) {
  return source != "activation_cos" && source != "activation_sin";
}

struct Moments {
  double sum = 0, sum_sq = 0, min = 0, max = 0;
  int64_t n = 0;
  void Add(double x) {
    if (n == 0 || x < min) min = x;
    if (n == 0 || x > max) max = x;
    sum += x;
    sum_sq += x * x;
    ++n;
  }
  double Mean() const { return n ? sum / n : 0; }
  // Population standard deviation; 1 when (almost) constant, so encoding stays finite.
  double Std() const {
    if (n == 0) return 1;
    const double var = std::max(0.0, sum_sq / n - Mean() * Mean());
    return var > 1e-12 ? std::sqrt(var) : 1.0;
  }
};

FeatureSpec Feature(std::string source, std::vector<std::string> types = {}) {
  FeatureSpec f;
  f.name = source == "count" ? absl::StrCat("log1p_count_", types.front())
           : IsLog1p(source) ? absl::StrCat("log1p_", source)
                             : source;
  f.source = std::move(source);
  f.layer_types = std::move(types);
  return f;
}

}  // namespace

EncodingSpec EncodingLayout(v1::ModelFamily family, int max_sequence_length) {
  EncodingSpec spec;
  spec.family = family;
  for (const char* source :
       {"batch_size", "parameters", "activations", "activations_x_batch", "depth"}) {
    spec.features.push_back(Feature(source));
  }
  std::vector<std::vector<std::string>> counts;
  bool activation = true;
  switch (family) {
    case v1::MODEL_FAMILY_MLP:
      counts = {{"Linear"}, {"BatchNorm1d"}, {"Dropout"}};
      break;
    case v1::MODEL_FAMILY_CNN:
      counts = {
          {"Conv2d"}, {"BatchNorm2d"}, {"Dropout"}, {"AdaptiveAvgPool2d"}, {"Linear"}};
      break;
    default:
      counts = {{"Linear"},
                {"LayerNorm"},
                {"Dropout"},
                {"Embedding"},
                {"MultiheadAttention", "NonDynamicallyQuantizableLinear"}};
      activation = false;
      break;
  }
  for (auto& types : counts) spec.features.push_back(Feature("count", std::move(types)));
  if (activation) {
    // The activation functions of the GPUMemNet generators, by canonical name.
    spec.activation_functions = {"ELU",  "GELU", "Identity", "LeakyReLU", "Mish", "PReLU",
                                 "ReLU", "SELU", "SiLU",     "Softplus",  "Tanh"};
    spec.features.push_back(Feature("activation_cos"));
    spec.features.push_back(Feature("activation_sin"));
  } else {
    spec.features.push_back(Feature("sequence_length"));
  }
  spec.sequence.max_length = max_sequence_length;
  return spec;
}

EncodingSpec FitEncoding(EncodingSpec spec,
                         const std::vector<v1::FeatureVector>& features,
                         const std::vector<const v1::ModelDescription*>& models) {
  std::vector<Moments> moments(spec.features.size());
  std::set<std::string> seen;
  for (const v1::FeatureVector& v : features) {
    const std::vector<double> raw = RawGlobalFeatures(spec, v);
    for (size_t i = 0; i < raw.size(); ++i) moments[i].Add(raw[i]);
    for (const auto& [type, count] : v.layer_counts()) {
      if (count > 0) seen.insert(type);
    }
  }
  for (size_t i = 0; i < spec.features.size(); ++i) {
    FeatureSpec& f = spec.features[i];
    f.mean = moments[i].Mean();
    f.std = moments[i].Std();
    f.min = moments[i].min;
    f.max = moments[i].max;
  }
  spec.seen_layer_types.assign(seen.begin(), seen.end());

  if (spec.sequence.max_length > 0) {
    std::set<std::string> types;
    Moments acts, params;
    for (const v1::ModelDescription* m : models) {
      for (const v1::Layer& layer : m->layers()) {
        types.insert(core::CanonicalLayerType(layer.type()));
        acts.Add(Log1p(static_cast<double>(layer.output_activations())));
        params.Add(Log1p(static_cast<double>(layer.parameters())));
      }
    }
    spec.sequence.vocabulary = {kUnknownToken};
    spec.sequence.vocabulary.insert(spec.sequence.vocabulary.end(), types.begin(),
                                    types.end());
    spec.sequence.activations_mean = acts.Mean();
    spec.sequence.activations_std = acts.Std();
    spec.sequence.parameters_mean = params.Mean();
    spec.sequence.parameters_std = params.Std();
  }
  return spec;
}

std::vector<double> RawGlobalFeatures(const EncodingSpec& spec,
                                      const v1::FeatureVector& features) {
  std::vector<double> raw;
  raw.reserve(spec.features.size());
  for (const FeatureSpec& f : spec.features) raw.push_back(RawFeature(spec, f, features));
  return raw;
}

std::vector<float> EncodeGlobal(const EncodingSpec& spec,
                                const v1::FeatureVector& features) {
  std::vector<float> out;
  out.reserve(spec.features.size());
  for (const FeatureSpec& f : spec.features) {
    out.push_back(static_cast<float>((RawFeature(spec, f, features) - f.mean) / f.std));
  }
  return out;
}

EncodedSequence EncodeSequence(const EncodingSpec& spec,
                               const v1::ModelDescription& model) {
  EncodedSequence seq;
  const SequenceSpec& s = spec.sequence;
  const int n = std::min(model.layers_size(), s.max_length);
  seq.truncated = model.layers_size() > s.max_length;
  seq.types.reserve(n);
  seq.numbers.reserve(2 * static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const v1::Layer& layer = model.layers(i);
    const std::string type = core::CanonicalLayerType(layer.type());
    // Index 0 is "<unknown>"; the rest is sorted, so binary search finds a type.
    auto it = std::lower_bound(s.vocabulary.begin() + (s.vocabulary.empty() ? 0 : 1),
                               s.vocabulary.end(), type);
    seq.types.push_back(it != s.vocabulary.end() && *it == type
                            ? static_cast<int64_t>(it - s.vocabulary.begin())
                            : 0);
    seq.numbers.push_back(static_cast<float>(
        (Log1p(static_cast<double>(layer.output_activations())) - s.activations_mean) /
        s.activations_std));
    seq.numbers.push_back(static_cast<float>(
        (Log1p(static_cast<double>(layer.parameters())) - s.parameters_mean) /
        s.parameters_std));
  }
  return seq;
}

std::vector<std::string> OutOfDistribution(const EncodingSpec& spec,
                                           const v1::FeatureVector& features) {
  std::vector<std::string> findings;
  std::vector<std::string> unseen;
  for (const auto& [type, count] : features.layer_counts()) {
    if (count > 0 && !std::binary_search(spec.seen_layer_types.begin(),
                                         spec.seen_layer_types.end(), type)) {
      unseen.push_back(type);
    }
  }
  if (!unseen.empty()) {
    std::sort(unseen.begin(), unseen.end());
    findings.push_back(absl::StrCat("layer types never seen in training: ",
                                    absl::StrJoin(unseen, ", ")));
  }
  if (!spec.activation_functions.empty() &&
      ActivationIndex(spec, features.activation_function()) == -2) {
    findings.push_back(absl::StrCat(
        "activation function ", features.activation_function(),
        " was not in training (known: ", absl::StrJoin(spec.activation_functions, ", "),
        ")"));
  }
  const std::vector<double> raw = RawGlobalFeatures(spec, features);
  for (size_t i = 0; i < raw.size(); ++i) {
    const FeatureSpec& f = spec.features[i];
    if (!IsLog1p(f.source)) continue;
    const double tolerance = 1e-9 * std::max(1.0, std::abs(f.max));
    if (raw[i] >= f.min - tolerance && raw[i] <= f.max + tolerance) continue;
    auto natural = [](double x) { return absl::StrFormat("%.6g", std::expm1(x)); };
    const std::string what =
        f.source == "count" ? absl::StrCat(absl::StrJoin(f.layer_types, "/"), " count")
                            : f.source;
    findings.push_back(absl::StrCat(what, " ", natural(raw[i]),
                                    " is outside the training range [", natural(f.min),
                                    ", ", natural(f.max), "]"));
  }
  return findings;
}

nlohmann::json EncodingSpec::ToJson() const {
  nlohmann::json j;
  j["family"] = common::FamilyName(family);
  j["features"] = nlohmann::json::array();
  for (const FeatureSpec& f : features) {
    nlohmann::json e = {{"name", f.name}, {"source", f.source}, {"mean", f.mean},
                        {"std", f.std},   {"min", f.min},       {"max", f.max}};
    if (!f.layer_types.empty()) e["layer_types"] = f.layer_types;
    j["features"].push_back(std::move(e));
  }
  j["activation_functions"] = activation_functions;
  j["activation_encoding"] =
      "function i of the list: (cos, sin) of pi * i / list size; none: (0, 0)";
  j["seen_layer_types"] = seen_layer_types;
  j["sequence"] = {{"max_length", sequence.max_length},
                   {"vocabulary", sequence.vocabulary},
                   {"activations_mean", sequence.activations_mean},
                   {"activations_std", sequence.activations_std},
                   {"parameters_mean", sequence.parameters_mean},
                   {"parameters_std", sequence.parameters_std}};
  return j;
}

absl::Status ReadFamily(common::strict_json::Fields<nlohmann::json>& f,
                        const std::string& key, v1::ModelFamily& out) {
  std::string word;
  GPUEST_RETURN_IF_ERROR(f.Get(key, word));
  std::optional<v1::ModelFamily> family = common::FamilyFromName(word);
  if (!family) return f.Error(key, absl::StrCat("is not a family: '", word, "'"));
  out = *family;
  return absl::OkStatus();
}

absl::StatusOr<EncodingSpec> EncodingSpec::FromJson(
    common::strict_json::Fields<nlohmann::json>& f) {
  EncodingSpec spec;
  GPUEST_RETURN_IF_ERROR(ReadFamily(f, "family", spec.family));
  GPUEST_ASSIGN_OR_RETURN(
      std::vector<common::strict_json::Fields<nlohmann::json>> features,
      f.Objects("features"));
  for (common::strict_json::Fields<nlohmann::json>& e : features) {
    FeatureSpec& feature = spec.features.emplace_back();
    GPUEST_RETURN_IF_ERROR(e.Get("name", feature.name));
    GPUEST_RETURN_IF_ERROR(e.Get("source", feature.source));
    GPUEST_RETURN_IF_ERROR(e.GetOptional("layer_types", feature.layer_types));
    GPUEST_RETURN_IF_ERROR(e.Get("mean", feature.mean));
    GPUEST_RETURN_IF_ERROR(e.Get("std", feature.std));
    GPUEST_RETURN_IF_ERROR(e.Get("min", feature.min));
    GPUEST_RETURN_IF_ERROR(e.Get("max", feature.max));
    GPUEST_RETURN_IF_ERROR(e.Finish());
    if (!(feature.std > 0)) return e.Error("std", "must be positive");
  }
  GPUEST_RETURN_IF_ERROR(f.Get("activation_functions", spec.activation_functions));
  // The encoding in words, for people reading the manifest; the code is above.
  std::string activation_encoding;
  GPUEST_RETURN_IF_ERROR(f.Get("activation_encoding", activation_encoding));
  GPUEST_RETURN_IF_ERROR(f.Get("seen_layer_types", spec.seen_layer_types));
  std::sort(spec.seen_layer_types.begin(), spec.seen_layer_types.end());
  GPUEST_ASSIGN_OR_RETURN(common::strict_json::Fields<nlohmann::json> s,
                          f.Object("sequence"));
  GPUEST_RETURN_IF_ERROR(s.Get("max_length", spec.sequence.max_length));
  GPUEST_RETURN_IF_ERROR(s.Get("vocabulary", spec.sequence.vocabulary));
  // Indices are the network's embedding rows: the order must be what was trained.
  if (!spec.sequence.vocabulary.empty() &&
      !std::is_sorted(spec.sequence.vocabulary.begin() + 1,
                      spec.sequence.vocabulary.end())) {
    return s.Error("vocabulary", "is not sorted after index 0");
  }
  GPUEST_RETURN_IF_ERROR(s.Get("activations_mean", spec.sequence.activations_mean));
  GPUEST_RETURN_IF_ERROR(s.Get("activations_std", spec.sequence.activations_std));
  GPUEST_RETURN_IF_ERROR(s.Get("parameters_mean", spec.sequence.parameters_mean));
  GPUEST_RETURN_IF_ERROR(s.Get("parameters_std", spec.sequence.parameters_std));
  GPUEST_RETURN_IF_ERROR(s.Finish());
  GPUEST_RETURN_IF_ERROR(f.Finish());
  return spec;
}

}  // namespace gpuest::gpumemnet
