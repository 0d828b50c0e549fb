// File: simulations.h
//
// The simulation estimators gpuest-calibrate-memory calibrates (models/allocsim,
// models/analytic), and the replay of one described run through each.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "estimators/allocsim/memory_model.h"
#include "estimators/allocsim/simulation_manifest.h"
#include "estimators/core/gpu_profiles.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::calibration {

// One simulation estimator being calibrated: its directory, and how it gets a trace.
struct SimulationModel {
  std::string id;
  allocsim::TraceSource trace_source;
  std::string description;
};

// allocsim (the request's trace), then analytic (a step built from the layers).
const std::vector<SimulationModel>& Simulations();

// What each simulation estimator makes of a described run, by estimator id.
absl::StatusOr<std::map<std::string, allocsim::ReplayResult>> ReplayEach(
    const v1::ModelDescription& model, const core::GpuProfile& gpu, int steps);

}  // namespace gpuest::calibration
