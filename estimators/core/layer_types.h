// File: layer_types.h
//
// The one place where layer-type spellings are normalised. Sources disagree
// ('linear' vs 'Linear', 'batch_normalization' vs 'BatchNorm1d'); the trainer and the
// server both go through CanonicalLayerType so that training and serving agree.
//
// The facts (canonical names, aliases, kinds, what each type saves for backward, the
// family rule) are data: proto/gpuest/v1/layer_types.json, which the Python describer
// loads too. The build embeds it; it is parsed once, on first use.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::core {

// What a layer does, coarse enough for features and family inference ("kind" in the
// table).
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

// What autograd keeps for a layer's backward ("saves" in the table, where each value
// says what it means and where it comes from).
enum class SavedForBackward {
  kNothing,
  kInput,
  kOutput,
  kInputAndStats,    // Input and per-channel statistics (batch norm).
  kMask,             // A one-byte mask of the output's size (dropout).
  kInputAndIndices,  // Input and int64 indices of the output's size (max pooling).
  kFusedAttention,   // As CUDA's fused attention kernels do.
  kInputAndEvoNorm,  // Input and four output-sized tensors (EvoNorm2dS0, S0a).
  kFloatInputAndNormalized,  // Input in float32 and the normalized tensor (RMSNorm in
                             // Python, as Hugging Face writes it).
};

struct LayerTypeInfo {
  std::string canonical;  // PyTorch class name, e.g. "BatchNorm1d".
  LayerKind kind = LayerKind::kUnknown;
  SavedForBackward saves = SavedForBackward::kInput;
};

// Canonical PyTorch class name, kind and saved tensors for a spelling from any source.
// Unknown types keep their spelling, get kind kUnknown (so callers can warn about them)
// and the table's "unknown_saves".
LayerTypeInfo ClassifyLayerType(absl::string_view type);

inline std::string CanonicalLayerType(absl::string_view type) {
  return ClassifyLayerType(type).canonical;
}

// Family from layer counts keyed by type, by the table's family rule: a recurrent
// layer makes OTHER, attention a Transformer (over a patch-embedding convolution),
// any other convolution a CNN, embeddings with layer norms a Transformer, dense layers
// with only normalisation, dropout, activations and reshapes beside them an MLP;
// anything else is OTHER. Types with a count of 0 do not count.
v1::ModelFamily InferFamily(
    const google::protobuf::Map<std::string, int64_t>& layer_counts);

// Reads a layer-type table as the embedded one is read, strictly: InvalidArgument
// naming the file and the key for a missing, mistyped or unknown key or value. For
// tests and for checking an edited table before it is built in.
absl::Status CheckLayerTypeTable(absl::string_view text, const std::string& file);

}  // namespace gpuest::core
