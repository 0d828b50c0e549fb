#include "estimators/ml/network_config.h"

#include "absl/strings/str_cat.h"

namespace gpuest::ml {

nlohmann::json NetworkConfig::ToJson() const {
  nlohmann::json j = {{"kind", kind},
                      {"global_features", global_features},
                      {"head_classes", head_classes},
                      {"hidden", hidden},
                      {"dropout", dropout}};
  if (kind == "transformer") {
    j["vocabulary"] = vocabulary;
    j["d_model"] = d_model;
    j["attention_heads"] = attention_heads;
    j["encoder_layers"] = encoder_layers;
    j["feedforward"] = feedforward;
  }
  return j;
}

absl::StatusOr<NetworkConfig> NetworkConfig::FromJson(const nlohmann::json& j) {
  try {
    NetworkConfig c;
    c.kind = j.at("kind").get<std::string>();
    c.global_features = j.at("global_features").get<int>();
    c.head_classes = j.at("head_classes").get<std::vector<int>>();
    c.hidden = j.at("hidden").get<std::vector<int>>();
    c.dropout = j.at("dropout").get<double>();
    if (c.kind == "transformer") {
      c.vocabulary = j.at("vocabulary").get<int>();
      c.d_model = j.at("d_model").get<int>();
      c.attention_heads = j.at("attention_heads").get<int>();
      c.encoder_layers = j.at("encoder_layers").get<int>();
      c.feedforward = j.at("feedforward").get<int>();
    } else if (c.kind != "mlp") {
      return absl::InvalidArgumentError(
          absl::StrCat("network: unknown kind '", c.kind, "'"));
    }
    bool ok = c.global_features > 0 && !c.head_classes.empty() && !c.hidden.empty();
    for (int n : c.head_classes) ok = ok && n > 0;
    for (int n : c.hidden) ok = ok && n > 0;
    if (c.kind == "transformer") {
      ok = ok && c.vocabulary > 0 && c.d_model > 0 && c.attention_heads > 0 &&
           c.d_model % c.attention_heads == 0 && c.encoder_layers > 0 &&
           c.feedforward > 0;
    }
    if (!ok) return absl::InvalidArgumentError("network: inconsistent hyperparameters");
    return c;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("network: ", e.what()));
  }
}

}  // namespace gpuest::ml
