// File: gpumemnet_estimator.h
//
// The served GPUMemNet / GPUUtilNet estimators: an ensemble of classifiers per
// (family, kind) read from a models/<id>/ directory (manifest.json + member weights)
// that gpuest-train wrote. The class lives in the .cc file, behind the libtorch door;
// this header is torch-free so that the server can include it.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "estimators/estimator.h"
#include "estimators/model_repository.h"
#include "estimators/registry.h"

namespace gpuest::ml {

// The EstimatorFactory for manifests with estimator_type "gpumemnet": loads every
// member onto options.device ("cpu" or "cuda") and sets libtorch to one intra-op
// thread (the server's worker pool is the parallelism).
absl::StatusOr<std::unique_ptr<Estimator>> CreateGpuMemNetEstimator(
    const ModelArtifact& artifact, const RegistryOptions& options);

}  // namespace gpuest::ml
