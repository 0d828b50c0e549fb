// File: default_factories.h
//
// The estimator factories a program passes to EstimatorRegistry::Load
// (RegistryOptions::factories) to load every kind of shipped model. Torch-free to
// include; linking it (gpuest_gpumemnet) brings in libtorch.
#pragma once

#include <map>
#include <string>

#include "estimators/registry.h"

namespace gpuest::ml {

// "gpumemnet" -> CreateGpuMemNetEstimator, "allocsim" -> CreateSimulationEstimator.
std::map<std::string, EstimatorFactory> DefaultEstimatorFactories();

// options with DefaultEstimatorFactories() filled in.
RegistryOptions WithDefaultFactories(RegistryOptions options);

}  // namespace gpuest::ml
