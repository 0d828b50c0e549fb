#include "estimators/default_factories.h"

#include "estimators/allocsim/simulation_estimator.h"
#include "estimators/gpumemnet/gpumemnet_estimator.h"
#include "estimators/horus/horus.h"

namespace gpuest {

std::map<std::string, EstimatorFactory> DefaultEstimatorFactories() {
  return {{"gpumemnet", ml::CreateGpuMemNetEstimator},
          {"allocsim", allocsim::CreateSimulationEstimator}};
}

std::vector<ArtifactlessEstimatorFactory> DefaultArtifactlessEstimators() {
  return {MakeHorusEstimator};
}

RegistryOptions WithDefaultFactories(RegistryOptions options) {
  options.factories = DefaultEstimatorFactories();
  options.artifactless = DefaultArtifactlessEstimators();
  return options;
}

}  // namespace gpuest
