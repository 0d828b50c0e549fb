#include "estimators/core/features.h"

#include <algorithm>

#include "estimators/core/layer_types.h"

namespace gpuest::core {
namespace {

// Most common activation layer; ties go to the one seen first.
std::string DominantActivation(const v1::ModelDescription& model) {
  std::vector<std::pair<std::string, int>> seen;
  for (const v1::Layer& layer : model.layers()) {
    LayerTypeInfo info = ClassifyLayerType(layer.type());
    if (info.kind != LayerKind::kActivation) continue;
    auto it = std::find_if(seen.begin(), seen.end(),
                           [&](const auto& s) { return s.first == info.canonical; });
    if (it == seen.end()) {
      seen.emplace_back(info.canonical, 1);
    } else {
      ++it->second;
    }
  }
  auto best =
      std::max_element(seen.begin(), seen.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  return best == seen.end() ? std::string() : best->first;
}

}  // namespace

v1::FeatureVector ExtractFeatures(const v1::ModelDescription& model) {
  v1::FeatureVector features;
  features.set_batch_size(model.batch_size());
  features.set_sequence_length(model.sequence_length());
  features.set_optimizer(model.optimizer());
  features.set_depth(model.layers_size());
  int64_t parameters = 0, activations = 0;
  auto& counts = *features.mutable_layer_counts();
  for (const v1::Layer& layer : model.layers()) {
    parameters += layer.parameters();
    activations += layer.output_activations();
    ++counts[CanonicalLayerType(layer.type())];
  }
  features.set_total_parameters(parameters);
  features.set_total_activations(activations);
  features.set_family(model.family() != v1::MODEL_FAMILY_UNSPECIFIED
                          ? model.family()
                          : InferFamily(counts));
  features.set_activation_function(model.activation_function().empty()
                                       ? DominantActivation(model)
                                       : CanonicalLayerType(model.activation_function()));
  return features;
}

v1::FeatureVector FeaturesOf(const v1::EstimateRequest& request) {
  if (request.has_model()) return ExtractFeatures(request.model());
  v1::FeatureVector features = request.features();
  google::protobuf::Map<std::string, int64_t> canonical;
  for (const auto& [type, count] : features.layer_counts()) {
    canonical[CanonicalLayerType(type)] += count;
  }
  *features.mutable_layer_counts() = std::move(canonical);
  if (!features.activation_function().empty()) {
    features.set_activation_function(CanonicalLayerType(features.activation_function()));
  }
  if (features.family() == v1::MODEL_FAMILY_UNSPECIFIED) {
    features.set_family(InferFamily(features.layer_counts()));
  }
  return features;
}

std::vector<std::string> UnknownLayerTypes(const v1::FeatureVector& features) {
  std::vector<std::string> unknown;
  for (const auto& [type, count] : features.layer_counts()) {
    if (ClassifyLayerType(type).kind == LayerKind::kUnknown) unknown.push_back(type);
  }
  std::sort(unknown.begin(), unknown.end());
  return unknown;
}

}  // namespace gpuest::core
