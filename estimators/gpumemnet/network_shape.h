// File: network_shape.h
//
// The hyperparameters that rebuild one GPUMemNet network, as plain data: what the
// libtorch module (network_module.h) needs and nothing else. Standard C++ only, so
// that lab/gpu/ml_check builds the served module against any libtorch with no other
// library. NetworkConfig (network_config.h) adds the manifest's JSON to it.
#pragma once

#include <vector>

namespace gpuest::gpumemnet {

// kMlp: an MLP over the global features. kTransformer: layer tokens through a small
// Transformer encoder, mean-pooled and concatenated with the global features.
enum class NetworkKind { kMlp, kTransformer };

struct NetworkShape {
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
};

}  // namespace gpuest::gpumemnet
