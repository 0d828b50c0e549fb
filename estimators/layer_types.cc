#include "estimators/layer_types.h"

#include <algorithm>
#include <cctype>

#include "absl/container/flat_hash_map.h"

namespace gpuest {
namespace {

// Lower-cased, underscores and spaces removed, so 'batch_normalization',
// 'BatchNormalization' and 'batchnormalization' meet.
std::string Squash(absl::string_view type) {
  std::string out;
  out.reserve(type.size());
  for (char c : type) {
    if (c == '_' || c == ' ' || c == '-') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

struct Tables {
  // Exact PyTorch class names first: GPT-2's Conv1D (a linear layer) and torch's
  // Conv1d differ only in case.
  absl::flat_hash_map<std::string, LayerTypeInfo> exact;
  // Then any spelling, squashed.
  absl::flat_hash_map<std::string, LayerTypeInfo> squashed;
};

const Tables& Table() {
  static const auto* table = [] {
    auto* t = new Tables();
    auto add = [t](std::string canonical, LayerKind kind,
                   std::initializer_list<const char*> aliases) {
      LayerTypeInfo info{canonical, kind};
      t->exact[canonical] = info;
      t->squashed.try_emplace(Squash(canonical), info);
      for (const char* alias : aliases) t->squashed.try_emplace(Squash(alias), info);
    };
    using K = LayerKind;
    add("Linear", K::kLinear, {"dense", "fc"});
    add("NonDynamicallyQuantizableLinear", K::kLinear, {"ndq_linear"});
    add("Bilinear", K::kLinear, {});
    add("Conv1d", K::kConv, {});
    add("Conv1D", K::kLinear, {});  // GPT-2's transposed linear (HF transformers).
    add("Conv2d", K::kConv, {});
    add("Conv3d", K::kConv, {});
    add("ConvTranspose1d", K::kConv, {});
    add("ConvTranspose2d", K::kConv, {});
    add("ConvTranspose3d", K::kConv, {});
    add("BatchNorm1d", K::kBatchNorm, {"batch_normalization", "batchnorm"});
    add("BatchNorm2d", K::kBatchNorm, {});
    add("BatchNorm3d", K::kBatchNorm, {});
    add("SyncBatchNorm", K::kBatchNorm, {});
    add("GroupNorm", K::kLayerNorm, {});
    add("InstanceNorm2d", K::kLayerNorm, {});
    add("LayerNorm", K::kLayerNorm, {"layer_normalization"});
    add("RMSNorm", K::kLayerNorm, {});
    add("Dropout", K::kDropout, {});
    add("Dropout1d", K::kDropout, {});
    add("Dropout2d", K::kDropout, {});
    add("AlphaDropout", K::kDropout, {});
    for (const char* act : {"ReLU",
                            "ReLU6",
                            "LeakyReLU",
                            "PReLU",
                            "ELU",
                            "SELU",
                            "CELU",
                            "GELU",
                            "SiLU",
                            "Mish",
                            "Softplus",
                            "Tanh",
                            "Sigmoid",
                            "Hardswish",
                            "Hardsigmoid",
                            "Hardtanh",
                            "LogSigmoid",
                            "Softsign",
                            "Tanhshrink",
                            "NewGELUActivation",
                            "GELUActivation",
                            "QuickGELUActivation"}) {
      add(act, K::kActivation, {});
    }
    add("Softmax", K::kSoftmax, {});
    add("LogSoftmax", K::kSoftmax, {});
    add("MaxPool1d", K::kPooling, {});
    add("MaxPool2d", K::kPooling, {"max_pool2d"});
    add("AvgPool2d", K::kPooling, {"avg_pool2d"});
    add("AdaptiveAvgPool1d", K::kPooling, {});
    add("AdaptiveAvgPool2d", K::kPooling, {"adaptive_avg_pool2d"});
    add("AdaptiveMaxPool2d", K::kPooling, {});
    add("Embedding", K::kEmbedding, {});
    add("EmbeddingBag", K::kEmbedding, {});
    add("MultiheadAttention", K::kAttention, {});
    add("Flatten", K::kShape, {});
    add("Unflatten", K::kShape, {});
    add("Identity", K::kShape, {});
    return t;
  }();
  return *table;
}

}  // namespace

LayerTypeInfo ClassifyLayerType(absl::string_view type) {
  const Tables& table = Table();
  if (auto it = table.exact.find(type); it != table.exact.end()) return it->second;
  if (auto it = table.squashed.find(Squash(type)); it != table.squashed.end()) {
    return it->second;
  }
  return LayerTypeInfo{std::string(type), LayerKind::kUnknown};
}

v1::ModelFamily InferFamily(
    const google::protobuf::Map<std::string, int64_t>& layer_counts) {
  bool conv = false, attention = false, embedding = false, layer_norm = false;
  bool dense_only = !layer_counts.empty();
  for (const auto& [type, count] : layer_counts) {
    if (count <= 0) continue;
    switch (ClassifyLayerType(type).kind) {
      case LayerKind::kConv:
        conv = true;
        break;
      case LayerKind::kAttention:
        attention = true;
        break;
      case LayerKind::kEmbedding:
        embedding = true;
        dense_only = false;
        break;
      case LayerKind::kLayerNorm:
        layer_norm = true;
        dense_only = false;
        break;
      case LayerKind::kLinear:
      case LayerKind::kBatchNorm:
      case LayerKind::kDropout:
      case LayerKind::kActivation:
      case LayerKind::kSoftmax:
      case LayerKind::kShape:
        break;
      default:
        dense_only = false;
        break;
    }
  }
  if (conv) return v1::MODEL_FAMILY_CNN;
  if (attention || (embedding && layer_norm)) return v1::MODEL_FAMILY_TRANSFORMER;
  if (dense_only) return v1::MODEL_FAMILY_MLP;
  return v1::MODEL_FAMILY_OTHER;
}

absl::string_view FamilyName(v1::ModelFamily family) {
  switch (family) {
    case v1::MODEL_FAMILY_MLP:
      return "mlp";
    case v1::MODEL_FAMILY_CNN:
      return "cnn";
    case v1::MODEL_FAMILY_TRANSFORMER:
      return "transformer";
    case v1::MODEL_FAMILY_OTHER:
      return "other";
    default:
      return "any";
  }
}

}  // namespace gpuest
