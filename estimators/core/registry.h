// File: registry.h
//
// Owns the loaded estimators and GPU profiles. Built once, at server start, from a
// model repository: the estimators without an artifact (a formula) plus one estimator
// per manifest, each made by a factory the caller passes in (default_factories.h).
// Immutable once built, so it is shared freely across threads. A reload builds a new
// registry and swaps it into the Engine (engine.h); a registry that cannot be built whole
// is never served.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "estimators/core/estimator.h"
#include "estimators/core/gpu_profiles.h"
#include "estimators/core/model_repository.h"

namespace gpuest::core {

struct RegistryOptions;

// Makes an estimator from one artifact; chosen by the manifest's "estimator_type". A
// factory that returns nullptr leaves the artifact out (a tool about to rewrite it).
using EstimatorFactory = std::function<absl::StatusOr<std::unique_ptr<Estimator>>(
    const ModelArtifact& artifact, const RegistryOptions& options)>;

// Makes an estimator that needs no artifact (a formula, such as Horus).
using ArtifactlessEstimatorFactory = std::function<std::unique_ptr<Estimator>()>;

struct RegistryOptions {
  std::string models_dir = "models";
  // Resolved device for ML estimators: "cpu" or "cuda".
  std::string device = "cpu";
  // estimator_type -> factory, for the types a manifest may name. The caller passes
  // them in (the server: DefaultEstimatorFactories(), default_factories.h), so that the
  // library itself does not link libtorch; a manifest of another type is an error.
  std::map<std::string, EstimatorFactory> factories = {};
  // The estimators without an artifact, made once per registry and listed first.
  std::vector<ArtifactlessEstimatorFactory> artifactless = {};
};

class EstimatorRegistry {
 public:
  // Scans options.models_dir (model_repository.h) and loads what it holds.
  static absl::StatusOr<std::unique_ptr<EstimatorRegistry>> Load(
      const RegistryOptions& options);
  // From a repository already scanned (options.models_dir is not read again): the
  // caller loads the rest of the same scan (the server: the contention model).
  static absl::StatusOr<std::unique_ptr<EstimatorRegistry>> Load(
      const ModelRepositoryContents& contents, const RegistryOptions& options);

  const std::vector<std::unique_ptr<Estimator>>& estimators() const {
    return estimators_;
  }
  // nullptr when no estimator has this id.
  const Estimator* Find(absl::string_view id) const;
  const GpuProfiles& gpus() const { return gpus_; }
  const std::string& models_version() const { return models_version_; }

 private:
  EstimatorRegistry(GpuProfiles gpus, std::string models_version)
      : gpus_(std::move(gpus)), models_version_(std::move(models_version)) {}

  GpuProfiles gpus_;
  std::string models_version_;
  std::vector<std::unique_ptr<Estimator>> estimators_;
};

}  // namespace gpuest::core
