// File: gpumemnet_estimator.h
//
// The served GPUMemNet / GPUUtilNet estimators: an ensemble of classifiers per
// (family, kind) read from a models/<id>/ directory (manifest.json + member weights)
// that gpuest-train wrote. The class lives in the .cc file, behind the libtorch door;
// this header is torch-free. On the CPU the members run through the plain forward
// (plain_forward.h), checked against the modules at load.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "estimators/core/estimator.h"
#include "estimators/core/model_repository.h"
#include "estimators/core/registry.h"

namespace gpuest::gpumemnet {

// The EstimatorFactory for manifests with estimator_type "gpumemnet": loads every
// member onto options.device ("cpu" or "cuda"). Process-wide libtorch settings are the
// program's (the server's: UseOneIntraOpThread in torch_device.h).
absl::StatusOr<std::unique_ptr<core::Estimator>> CreateGpuMemNetEstimator(
    const core::ModelArtifact& artifact, const core::RegistryOptions& options);

}  // namespace gpuest::gpumemnet
