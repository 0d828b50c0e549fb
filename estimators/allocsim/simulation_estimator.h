// File: simulation_estimator.h
//
// The served memory estimators built on the allocator simulation, one per model
// directory whose manifest says "estimator_type": "allocsim":
// - "trace_source": "request": replays the trace the request carries (allocsim);
// - "trace_source": "layers": builds the step from the layer sequence by per-layer
//   rules (layer_trace.h) and replays that (analytic); for a request that carries a
//   trace, only when asked for by name, since the trace says better what the rules
//   approximate (and is tighter on the held-out rows of docs/accuracy.md).
// The manifest holds the per-family calibration gpuest-calibrate-memory fitted
// (memory_model.h) and the held-out metrics it measured.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "estimators/core/registry.h"

namespace gpuest::allocsim {

absl::StatusOr<std::unique_ptr<core::Estimator>> CreateSimulationEstimator(
    const core::ModelArtifact& artifact, const core::RegistryOptions& options);

}  // namespace gpuest::allocsim
