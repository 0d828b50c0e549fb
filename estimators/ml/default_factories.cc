#include "estimators/ml/default_factories.h"

#include "estimators/ml/gpumemnet_estimator.h"

namespace gpuest::ml {

std::map<std::string, EstimatorFactory> DefaultEstimatorFactories() {
  return {{"gpumemnet", CreateGpuMemNetEstimator}};
}

RegistryOptions WithDefaultFactories(RegistryOptions options) {
  options.factories = DefaultEstimatorFactories();
  return options;
}

}  // namespace gpuest::ml
