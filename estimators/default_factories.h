// File: default_factories.h
//
// The estimator factories a program passes to EstimatorRegistry::Load
// (RegistryOptions::factories) to load every kind of shipped model: the one place that
// knows all the kinds, so that no estimator library links another. Torch-free to
// include; linking it (gpuest_estimators) brings in libtorch.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "estimators/core/registry.h"

namespace gpuest::estimators {

// "gpumemnet" -> gpumemnet::CreateGpuMemNetEstimator,
// "allocsim" -> allocsim::CreateSimulationEstimator.
std::map<std::string, core::EstimatorFactory> DefaultEstimatorFactories();

// The formulas: MakeHorusEstimator.
std::vector<core::ArtifactlessEstimatorFactory> DefaultArtifactlessEstimators();

// options with DefaultEstimatorFactories() and DefaultArtifactlessEstimators() filled
// in.
core::RegistryOptions WithDefaultFactories(core::RegistryOptions options);

}  // namespace gpuest::estimators
