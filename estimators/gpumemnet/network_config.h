// File: network_config.h
//
// The hyperparameters that rebuild one GPUMemNet network (an ensemble member) before
// its weights are loaded. The trainer writes them into the manifest per member; the
// served estimator reads them back. No libtorch here (networks.h has the modules).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/strict_json.h"
#include "nlohmann/json.hpp"

namespace gpuest::ml {

// kMlp: an MLP over the global features. kTransformer: layer tokens through a small
// Transformer encoder, mean-pooled and concatenated with the global features.
enum class NetworkKind { kMlp, kTransformer };

// "mlp", "transformer": the words manifests, flags and reports use.
const char* NetworkKindName(NetworkKind kind);
// The kind a word names; nullopt for anything else.
std::optional<NetworkKind> NetworkKindFromName(absl::string_view name);
// The kind f's key names; InvalidArgument naming the key for another word.
absl::Status ReadNetworkKind(strict_json::Fields<nlohmann::json>& f,
                             const std::string& key, NetworkKind& out);

struct NetworkConfig {
  NetworkKind kind = NetworkKind::kMlp;
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

  bool sequence() const { return kind == NetworkKind::kTransformer; }
  int total_classes() const {
    int n = 0;
    for (int c : head_classes) n += c;
    return n;
  }
  nlohmann::json ToJson() const;
  // Every key read strictly: a missing, mistyped or unknown key is an error naming it.
  static absl::StatusOr<NetworkConfig> FromJson(strict_json::Fields<nlohmann::json>& f);
};

}  // namespace gpuest::ml
