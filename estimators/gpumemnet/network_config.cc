#include "estimators/gpumemnet/network_config.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace gpuest::gpumemnet {

const char* NetworkKindName(NetworkKind kind) {
  return kind == NetworkKind::kTransformer ? "transformer" : "mlp";
}

std::optional<NetworkKind> NetworkKindFromName(absl::string_view name) {
  for (NetworkKind kind : {NetworkKind::kMlp, NetworkKind::kTransformer}) {
    if (name == NetworkKindName(kind)) return kind;
  }
  return std::nullopt;
}

absl::Status ReadNetworkKind(common::strict_json::Fields<nlohmann::json>& f,
                             const std::string& key, NetworkKind& out) {
  std::string word;
  GPUEST_RETURN_IF_ERROR(f.Get(key, word));
  std::optional<NetworkKind> kind = NetworkKindFromName(word);
  if (!kind) return f.Error(key, "must be \"mlp\" or \"transformer\"");
  out = *kind;
  return absl::OkStatus();
}

nlohmann::json NetworkConfig::ToJson() const {
  nlohmann::json j = {{"kind", NetworkKindName(kind)},
                      {"global_features", global_features},
                      {"head_classes", head_classes},
                      {"hidden", hidden},
                      {"dropout", dropout}};
  if (sequence()) {
    j["vocabulary"] = vocabulary;
    j["d_model"] = d_model;
    j["attention_heads"] = attention_heads;
    j["encoder_layers"] = encoder_layers;
    j["feedforward"] = feedforward;
  }
  return j;
}

absl::StatusOr<NetworkConfig> NetworkConfig::FromJson(
    common::strict_json::Fields<nlohmann::json>& f) {
  NetworkConfig c;
  GPUEST_RETURN_IF_ERROR(ReadNetworkKind(f, "kind", c.kind));
  GPUEST_RETURN_IF_ERROR(f.Get("global_features", c.global_features));
  GPUEST_RETURN_IF_ERROR(f.Get("head_classes", c.head_classes));
  GPUEST_RETURN_IF_ERROR(f.Get("hidden", c.hidden));
  GPUEST_RETURN_IF_ERROR(f.Get("dropout", c.dropout));
  if (c.sequence()) {
    GPUEST_RETURN_IF_ERROR(f.Get("vocabulary", c.vocabulary));
    GPUEST_RETURN_IF_ERROR(f.Get("d_model", c.d_model));
    GPUEST_RETURN_IF_ERROR(f.Get("attention_heads", c.attention_heads));
    GPUEST_RETURN_IF_ERROR(f.Get("encoder_layers", c.encoder_layers));
    GPUEST_RETURN_IF_ERROR(f.Get("feedforward", c.feedforward));
  }
  GPUEST_RETURN_IF_ERROR(f.Finish());
  bool ok = c.global_features > 0 && !c.head_classes.empty() && !c.hidden.empty();
  for (int n : c.head_classes) ok = ok && n > 0;
  for (int n : c.hidden) ok = ok && n > 0;
  if (c.sequence()) {
    ok = ok && c.vocabulary > 0 && c.d_model > 0 && c.attention_heads > 0 &&
         c.d_model % c.attention_heads == 0 && c.encoder_layers > 0 && c.feedforward > 0;
  }
  if (!ok) return f.Invalid("holds inconsistent hyperparameters");
  return c;
}

}  // namespace gpuest::gpumemnet
