// File: features.h
//
// The one function that turns a request into GPUMemNet's feature vector. The trainer
// and the server both call it, so training and serving cannot drift apart.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpuest/v1/estimate.pb.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::core {

// Summarises a description: totals, depth, layer counts by canonical type, the family
// (given, else inferred) and the activation function (given, else the most common
// activation layer). The description must already be valid.
v1::FeatureVector ExtractFeatures(const v1::ModelDescription& model);

// Features of a validated request: extracted from its description, or the caller's
// vector with layer-count keys canonicalised and the family inferred when absent.
v1::FeatureVector FeaturesOf(const v1::EstimateRequest& request);

// Layer types in the request that the normaliser does not know, sorted.
std::vector<std::string> UnknownLayerTypes(const v1::FeatureVector& features);

}  // namespace gpuest::core
