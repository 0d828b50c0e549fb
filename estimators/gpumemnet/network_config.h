// File: network_config.h
//
// The hyperparameters that rebuild one GPUMemNet network (an ensemble member) before
// its weights are loaded. The trainer writes them into the manifest per member; the
// served estimator reads them back. No libtorch here (network_module.h has the module).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/strict_json.h"
#include "estimators/gpumemnet/network_shape.h"
#include "nlohmann/json.hpp"

namespace gpuest::gpumemnet {

// "mlp", "transformer": the words manifests, flags and reports use.
const char* NetworkKindName(NetworkKind kind);
// The kind a word names; nullopt for anything else.
std::optional<NetworkKind> NetworkKindFromName(absl::string_view name);
// The kind f's key names; InvalidArgument naming the key for another word.
absl::Status ReadNetworkKind(common::strict_json::Fields<nlohmann::json>& f,
                             const std::string& key, NetworkKind& out);

// NetworkShape with its manifest form.
struct NetworkConfig : NetworkShape {
  nlohmann::json ToJson() const;
  // Every key read strictly: a missing, mistyped or unknown key is an error naming it.
  static absl::StatusOr<NetworkConfig> FromJson(
      common::strict_json::Fields<nlohmann::json>& f);
};

}  // namespace gpuest::gpumemnet
