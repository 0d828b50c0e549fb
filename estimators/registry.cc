#include "estimators/registry.h"

#include "absl/strings/str_cat.h"
#include "estimators/horus.h"
#include "estimators/status_macros.h"
#include "nlohmann/json.hpp"

namespace gpuest {
namespace {

absl::StatusOr<std::string> EstimatorType(const ModelArtifact& artifact) {
  try {
    return nlohmann::json::parse(artifact.manifest_text)
        .at("estimator_type")
        .get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(artifact.directory, "/manifest.json: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<EstimatorRegistry>> EstimatorRegistry::Load(
    const RegistryOptions& options) {
  GPUEST_ASSIGN_OR_RETURN(ModelRepositoryContents contents,
                          ScanModelRepository(options.models_dir));
  GPUEST_ASSIGN_OR_RETURN(GpuProfiles gpus,
                          GpuProfiles::LoadFile(contents.gpu_profiles_path));
  std::unique_ptr<EstimatorRegistry> registry(
      new EstimatorRegistry(std::move(gpus), contents.version));
  registry->estimators_.push_back(MakeHorusEstimator());

  for (const ModelArtifact& artifact : contents.models) {
    GPUEST_ASSIGN_OR_RETURN(std::string type, EstimatorType(artifact));
    auto factory = options.factories.find(type);
    if (factory == options.factories.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(artifact.directory, "/manifest.json: unknown estimator_type '",
                       type, "' (this program was built without its factory)"));
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

}  // namespace gpuest
