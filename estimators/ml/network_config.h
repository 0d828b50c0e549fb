// File: network_config.h
//
// The hyperparameters that rebuild one GPUMemNet network (an ensemble member) before
// its weights are loaded. The trainer writes them into the manifest per member; the
// served estimator reads them back. No libtorch here (networks.h has the modules).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gpuest::ml {

struct NetworkConfig {
  // "mlp": an MLP over the global features. "transformer": layer tokens through a
  // small Transformer encoder, mean-pooled and concatenated with the global features.
  std::string kind = "mlp";
  int global_features = 0;
  // One classification head per target; the network's logits are the heads' classes
  // one after another, in this order.
  std::vector<int> head_classes;
  std::vector<int> hidden;  // Widths of the MLP trunk.
  double dropout = 0.1;
  // Transformer-based only.
  int vocabulary = 0;  // Token types, index 0 the unknown type.
  int d_model = 32;
  int attention_heads = 4;
  int encoder_layers = 2;
  int feedforward = 64;

  int total_classes() const {
    int n = 0;
    for (int c : head_classes) n += c;
    return n;
  }
  nlohmann::json ToJson() const;
  static absl::StatusOr<NetworkConfig> FromJson(const nlohmann::json& json);
};

}  // namespace gpuest::ml
