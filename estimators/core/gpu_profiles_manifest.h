// File: gpu_profiles_manifest.h
//
// models/gpu_profiles.json as one type: what the server loads (GpuProfiles::LoadFile)
// and what gpuest-calibrate-memory rewrites when it calibrates a GPU's context. Every
// key of the file is read and written here, nowhere else.
//
// Required: "default" and "gpus", and for each GPU every key but "aliases" (absent
// reads as none; written always). "_comment", for people reading the file, is
// optional. Memory sizes are whole MiB in the file; the profiles hold bytes.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimators/core/gpu_profiles.h"
#include "nlohmann/json.hpp"

namespace gpuest::core {

struct GpuProfilesManifest {
  std::string comment;
  std::string default_id;  // The GPU the shipped estimators were trained on.
  std::vector<GpuProfile> gpus;

  // Keys in the file's order (ordered_json keeps it).
  nlohmann::ordered_json ToJson() const;
  // InvalidArgument names the file and the key; also checks that every GPU has an id
  // and memory, that "constants" is "calibrated" or "assumed", and that the default is
  // in the list.
  static absl::StatusOr<GpuProfilesManifest> FromJson(const nlohmann::ordered_json& json,
                                                      const std::string& file);
  static absl::StatusOr<GpuProfilesManifest> Parse(const std::string& text,
                                                   const std::string& file);
  static absl::StatusOr<GpuProfilesManifest> Load(const std::string& path);
  // The JSON as the file holds it (two-space indent, a final newline).
  std::string Text() const;

  // Sets a GPU's CUDA context from measurements made on it: its context, its constants
  // "calibrated", and its basis "context: <context_basis>" (the basis's cuBLAS
  // workspace part is kept). measured_on, when not empty, must be the GPU's name: rows
  // of another GPU are refused. With assumed_too, every GPU whose constants are assumed
  // takes the same figure (same driver and CUDA stack, unmeasured). The one way both
  // calibrations (gpuest-calibrate-memory, gpuest-collect calibrate through
  // gpuest-set-gpu-context) change the file.
  absl::Status SetMeasuredContext(const std::string& gpu_id,
                                  const std::string& measured_on, double context_mib,
                                  const std::string& context_basis, bool assumed_too);
};

}  // namespace gpuest::core
