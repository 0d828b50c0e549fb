// File: manifest_json.h
//
// How a manifest type reads and writes its file, on common/strict_json.h's strict
// reader: its dataset digests, its parse and load, and the "estimator_type" the
// registry picks a factory by.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/strict_json.h"
#include "common/text_file.h"
#include "nlohmann/json.hpp"

namespace gpuest::core::manifest {

using common::strict_json::Fields;

// A dataset file a model was made from, with its digest. role says what the file was
// used for; empty (and left out of the JSON) where the manifest does not say.
struct DatasetDigest {
  std::string file;
  std::string sha256;
  std::string role;

  template <typename Json>
  Json ToJson() const {
    Json j;
    j["file"] = file;
    j["sha256"] = sha256;
    if (!role.empty()) j["role"] = role;
    return j;
  }

  template <typename Json>
  static absl::StatusOr<DatasetDigest> FromJson(Fields<Json>& f) {
    DatasetDigest d;
    absl::Status s = f.Get("file", d.file);
    if (s.ok()) s = f.Get("sha256", d.sha256);
    if (s.ok()) s = f.GetOptional("role", d.role);
    if (s.ok()) s = f.Finish();
    if (!s.ok()) return s;
    return d;
  }
};

// A manifest type's value from a file's text: Manifest::FromJson(Json, file) on the
// parsed document.
template <typename Manifest, typename Json>
absl::StatusOr<Manifest> ParseManifest(absl::string_view text, const std::string& file) {
  absl::StatusOr<Json> json = Fields<Json>::Parse(text, file);
  if (!json.ok()) return json.status();
  return Manifest::FromJson(*json, file);
}

// The same from the file itself.
template <typename Manifest, typename Json>
absl::StatusOr<Manifest> LoadManifest(const std::string& path) {
  absl::StatusOr<std::string> text =
      common::ReadTextFile(path, common::kMaxConfigFileBytes);
  if (!text.ok()) return text.status();
  return ParseManifest<Manifest, Json>(*text, path);
}

// The "estimator_type" an estimator's manifest names its factory with (the registry
// picks the factory by it; the type's own FromJson reads the rest).
inline absl::StatusOr<std::string> EstimatorTypeOf(const std::string& text,
                                                   const std::string& file) {
  absl::StatusOr<nlohmann::json> json = Fields<nlohmann::json>::Parse(text, file);
  if (!json.ok()) return json.status();
  absl::StatusOr<Fields<nlohmann::json>> fields = Fields<nlohmann::json>::Of(*json, file);
  if (!fields.ok()) return fields.status();
  std::string type;
  absl::Status read = fields->Get("estimator_type", type);
  if (!read.ok()) return read;
  return type;
}

}  // namespace gpuest::core::manifest
