// File: request_validation.h
//
// Checks every field of an EstimateRequest before any estimator sees it, every number
// against its row of the one table (field_bounds.h). A bad field
// gives InvalidArgument whose message starts with the field's path
// ("model.layers[3].parameters: ..."), which the server returns as INVALID_ARGUMENT.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "estimators/core/field_bounds.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest::core {

absl::Status ValidateRequest(const v1::EstimateRequest& request,
                             const ValidationLimits& limits);

absl::Status ValidateModel(const v1::ModelDescription& model,
                           const ValidationLimits& limits);

}  // namespace gpuest::core
