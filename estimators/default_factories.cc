#include "estimators/default_factories.h"

#include "estimators/allocsim/simulation_estimator.h"
#include "estimators/gpumemnet/gpumemnet_estimator.h"
#include "estimators/horus/horus.h"

namespace gpuest::estimators {

std::map<std::string, core::EstimatorFactory> DefaultEstimatorFactories() {
  return {{"gpumemnet", gpumemnet::CreateGpuMemNetEstimator},
          {"allocsim", allocsim::CreateSimulationEstimator}};
}

std::vector<core::ArtifactlessEstimatorFactory> DefaultArtifactlessEstimators() {
  return {horus::MakeHorusEstimator};
}

core::RegistryOptions WithDefaultFactories(core::RegistryOptions options) {
  options.factories = DefaultEstimatorFactories();
  options.artifactless = DefaultArtifactlessEstimators();
  return options;
}

}  // namespace gpuest::estimators
