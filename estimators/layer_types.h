// File: layer_types.h
//
// The one place where layer-type spellings are normalised. Sources disagree
// ('linear' vs 'Linear', 'batch_normalization' vs 'BatchNorm1d'); the trainer and the
// server both go through CanonicalLayerType so that training and serving agree.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest {

// What a layer does, coarse enough for features and family inference.
enum class LayerKind {
  kLinear,
  kConv,
  kBatchNorm,
  kLayerNorm,
  kDropout,
  kActivation,
  kPooling,
  kEmbedding,
  kAttention,
  kSoftmax,
  kShape,  // Flatten, Identity, reshapes: no compute, no parameters.
  kUnknown,
};

struct LayerTypeInfo {
  std::string canonical;  // PyTorch class name, e.g. "BatchNorm1d".
  LayerKind kind = LayerKind::kUnknown;
};

// Canonical PyTorch class name and kind for a spelling from any source. Unknown types
// keep their spelling and get kind kUnknown, so callers can warn about them.
LayerTypeInfo ClassifyLayerType(absl::string_view type);

inline std::string CanonicalLayerType(absl::string_view type) {
  return ClassifyLayerType(type).canonical;
}

// Family from layer counts keyed by canonical type: any convolution makes a CNN,
// attention or an embedding with layer norms a Transformer, only dense, batch-norm,
// dropout and activation layers an MLP; anything else is OTHER.
v1::ModelFamily InferFamily(
    const google::protobuf::Map<std::string, int64_t>& layer_counts);

// "mlp", "cnn", "transformer", "other", "any".
absl::string_view FamilyName(v1::ModelFamily family);

}  // namespace gpuest
