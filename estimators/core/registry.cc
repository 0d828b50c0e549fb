#include "estimators/core/registry.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "estimators/core/manifest_json.h"
#include "estimators/core/stack_context.h"

namespace gpuest::core {

absl::StatusOr<std::unique_ptr<EstimatorRegistry>> EstimatorRegistry::Load(
    const RegistryOptions& options) {
  GPUEST_ASSIGN_OR_RETURN(const ModelRepositoryContents contents,
                          ScanModelRepository(options.models_dir));
  return Load(contents, options);
}

absl::StatusOr<std::unique_ptr<EstimatorRegistry>> EstimatorRegistry::Load(
    const ModelRepositoryContents& contents, const RegistryOptions& options) {
  GPUEST_ASSIGN_OR_RETURN(GpuProfiles gpus,
                          GpuProfiles::LoadFile(contents.gpu_profiles_path));
  for (const auto& [path, text] : contents.context_files) {
    GPUEST_ASSIGN_OR_RETURN(auto measured, ParseCollectedContext(text, path));
    if (absl::Status added = gpus.AddMeasuredContext(measured.first, measured.second);
        !added.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", added.message()));
    }
  }
  gpus.LendContexts();
  std::unique_ptr<EstimatorRegistry> registry(
      new EstimatorRegistry(std::move(gpus), contents.version));
  for (const ArtifactlessEstimatorFactory& make : options.artifactless) {
    registry->estimators_.push_back(make());
  }

  for (const ModelArtifact& artifact : contents.models) {
    const std::string file = absl::StrCat(artifact.directory, "/manifest.json");
    GPUEST_ASSIGN_OR_RETURN(const std::string type, core::manifest::EstimatorTypeOf(
                                                        artifact.manifest_text, file));
    auto factory = options.factories.find(type);
    if (factory == options.factories.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": unknown estimator_type '", type,
                       "' (this program was built without its factory)"));
    }
    GPUEST_ASSIGN_OR_RETURN(std::unique_ptr<Estimator> estimator,
                            factory->second(artifact, options));
    if (estimator == nullptr) continue;  // The program leaves this type out.
    if (registry->Find(estimator->Info().id()) != nullptr) {
      return absl::AlreadyExistsError(
          absl::StrCat("two estimators have the id '", estimator->Info().id(), "'"));
    }
    registry->estimators_.push_back(std::move(estimator));
  }
  return registry;
}

const Estimator* EstimatorRegistry::Find(absl::string_view id) const {
  for (const auto& estimator : estimators_) {
    if (estimator->Info().id() == id) return estimator.get();
  }
  return nullptr;
}

}  // namespace gpuest::core
