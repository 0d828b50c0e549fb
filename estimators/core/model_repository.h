// File: model_repository.h
//
// Finds and reads what a model directory holds, in the manner of Triton's model
// repository: gpu_profiles.json at the top, one sub-directory per estimator with a
// manifest.json, and the placement's contention model (contention/contention.json).
// Loading the estimators is the registry's job, parsing the contention model the
// placement's (placement/contention_model.h), not this file's.
//
// Every file of a model's directory is read once, here: the loaders verify and load
// the same bytes that the repository's version is computed from.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuest::core {

struct ModelArtifact {
  std::string id;             // The directory's name.
  std::string directory;      // Its path.
  std::string manifest_text;  // manifest.json, unparsed.
  // The directory's other regular files (a model's weights), name -> bytes. A model
  // directory holds its model's files and nothing else: all of them are read.
  std::map<std::string, std::string> files;
};

struct ModelRepositoryContents {
  std::string gpu_profiles_path;
  std::vector<ModelArtifact> models;  // Sorted by id.
  // <dir>/contention/contention.json, and its bytes when the file is there.
  std::string contention_path;
  std::optional<std::string> contention_text;
  // <dir>/contexts/*.json: the files `gpuest-collect context` wrote on GPU nodes
  // (stack_context.h), path and text, in name order.
  std::vector<std::pair<std::string, std::string>> context_files;
  // "<models>-<digest>": changes whenever a byte of any model's files (manifest,
  // weights), a model's id, a file's name, the GPU profiles or the contention model
  // change.
  std::string version;
};

// Where a model repository keeps the contexts measured on nodes: <models_dir>/contexts.
inline constexpr char kContextsDirectory[] = "contexts";

// What a scan holds: one model's weights or other file (the largest shipped is 1 MB),
// and the whole repository (many files each under their bound must not add up to
// gigabytes). JSON documents read under kMaxConfigFileBytes (common/text_file.h).
inline constexpr uint64_t kMaxModelFileBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxRepositoryBytes = uint64_t{512} << 20;

// Where a model repository keeps the contention model:
// <models_dir>/contention/contention.json.
std::string ContentionModelPath(const std::string& models_dir);

// NotFound when dir is not a directory, or when gpu_profiles.json, a model's
// manifest.json (present, even as a dangling link) or another of its files cannot be
// read; Internal when a directory cannot be listed. Sub-directories without a
// manifest.json are not models.
absl::StatusOr<ModelRepositoryContents> ScanModelRepository(const std::string& dir);

}  // namespace gpuest::core
