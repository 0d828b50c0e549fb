// The GPUMemNet manifest parts' tests' shared steps (feature_encoding_test,
// targets_test, network_config_test): a part read by the strict reader as the
// manifest reads it, and the refusal's message.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/strict_json.h"
#include "nlohmann/json.hpp"

namespace gpuest::gpumemnet::manifest_part {

// A part read by the strict reader as a manifest reads it, from "m.json".
template <typename Part>
absl::StatusOr<Part> Read(const nlohmann::json& json) {
  absl::StatusOr<common::strict_json::Fields<nlohmann::json>> fields =
      common::strict_json::Fields<nlohmann::json>::Of(json, "m.json");
  if (!fields.ok()) return fields.status();
  return Part::FromJson(*fields);
}

// The error's message, for checking that it names the file and the key.
template <typename Part>
std::string Refusal(const nlohmann::json& json) {
  absl::StatusOr<Part> part = Read<Part>(json);
  return part.ok() ? "accepted" : std::string(part.status().message());
}

}  // namespace gpuest::gpumemnet::manifest_part
