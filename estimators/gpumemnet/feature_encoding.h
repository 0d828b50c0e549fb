// File: feature_encoding.h
//
// From the one feature function (FeaturesOf / ExtractFeatures) to the numbers the
// GPUMemNet networks take, shared by the trainer (gpuest-train) and the served
// estimator so that training and serving cannot drift apart. No libtorch here.
//
// An EncodingSpec says which global features a family uses (batch size, parameters,
// activations, activations x batch, depth, per-type layer counts, sequence length,
// the activation function as cos/sin of one angle), their standardisation and raw
// training range, and, for the Transformer-based estimator, the layer-token
// vocabulary and sequence length. The trainer fits it on the training split and
// writes it into the manifest; the server reads it back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/strict_json.h"
#include "gpuest/v1/estimate.pb.h"
#include "gpuest/v1/model.pb.h"
#include "nlohmann/json.hpp"

namespace gpuest::gpumemnet {

// One global feature. `source` says what it is computed from:
//   "batch_size", "parameters", "activations", "activations_x_batch", "depth",
//   "sequence_length": log1p of that total;
//   "count": log1p of the largest count among `layer_types` (canonical names);
//   "activation_cos", "activation_sin": the activation function's angle.
struct FeatureSpec {
  std::string name;
  std::string source;
  std::vector<std::string> layer_types;  // Only for "count".
  // Standardisation, from the training split: (raw - mean) / std.
  double mean = 0;
  double std = 1;
  // Raw (pre-standardisation) training range, for out-of-distribution warnings.
  double min = 0;
  double max = 0;
};

// Per-layer tokens for the Transformer-based estimator.
struct SequenceSpec {
  int max_length = 0;  // 0: the estimator takes no sequence.
  // Canonical layer types seen in training; index 0 is "<unknown>".
  std::vector<std::string> vocabulary;
  // Standardisation of log1p(output activations) and log1p(parameters) per layer.
  double activations_mean = 0, activations_std = 1;
  double parameters_mean = 0, parameters_std = 1;
};

// The family f's key names ("cnn"); InvalidArgument naming the key for another word.
absl::Status ReadFamily(common::strict_json::Fields<nlohmann::json>& f,
                        const std::string& key, v1::ModelFamily& out);

struct EncodingSpec {
  v1::ModelFamily family = v1::MODEL_FAMILY_UNSPECIFIED;
  std::vector<FeatureSpec> features;
  // Activation functions by canonical name; function i has angle pi * i / size.
  // An absent activation encodes as (0, 0). Empty for families without one.
  std::vector<std::string> activation_functions;
  SequenceSpec sequence;
  // Canonical layer types seen in training (every kind of estimator warns on others).
  std::vector<std::string> seen_layer_types;

  nlohmann::json ToJson() const;
  static absl::StatusOr<EncodingSpec> FromJson(
      common::strict_json::Fields<nlohmann::json>& f);
};

// The feature layout of a family before fitting (standardisation 0/1, ranges empty):
// MLP, CNN and Transformer as in the paper's Section 4.3. max_sequence_length 0 makes
// a spec without layer tokens.
EncodingSpec EncodingLayout(v1::ModelFamily family, int max_sequence_length);

// Fits standardisation, ranges, vocabulary and seen types on training examples.
// models may be empty (features given directly); then the vocabulary stays empty.
EncodingSpec FitEncoding(EncodingSpec layout,
                         const std::vector<v1::FeatureVector>& features,
                         const std::vector<const v1::ModelDescription*>& models);

// Raw (log1p, unstandardised) global features in spec order.
std::vector<double> RawGlobalFeatures(const EncodingSpec& spec,
                                      const v1::FeatureVector& features);
// Standardised global features in spec order.
std::vector<float> EncodeGlobal(const EncodingSpec& spec,
                                const v1::FeatureVector& features);

struct EncodedSequence {
  std::vector<int64_t> types;  // Vocabulary index per layer, 0 when unseen.
  std::vector<float> numbers;  // Two standardised numbers per layer.
  bool truncated = false;      // More layers than max_length: the rest were cut.
};
EncodedSequence EncodeSequence(const EncodingSpec& spec,
                               const v1::ModelDescription& model);

// What is outside the training distribution, in words, one entry per finding:
// layer types never seen in training, an activation function outside the list, and
// each global feature outside its raw training range (named, with the range).
std::vector<std::string> OutOfDistribution(const EncodingSpec& spec,
                                           const v1::FeatureVector& features);

}  // namespace gpuest::gpumemnet
