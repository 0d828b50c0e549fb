// File: request_validation.h
//
// Checks every field of an EstimateRequest before any estimator sees it. A bad field
// gives InvalidArgument whose message starts with the field's path
// ("model.layers[3].parameters: ..."), which the server returns as INVALID_ARGUMENT.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest {

struct ValidationLimits {
  int64_t max_layers = 10000;
  int64_t max_trace_events = 2000000;
  int64_t max_batch_size = int64_t{1} << 24;
  // Per-layer parameters and activations, and the totals of a feature vector: large
  // enough for any real model, small enough that bytes never overflow 64 bits.
  int64_t max_count = int64_t{1} << 44;
  int64_t max_name_length = 1024;
};

absl::Status ValidateRequest(const v1::EstimateRequest& request,
                             const ValidationLimits& limits);

absl::Status ValidateModel(const v1::ModelDescription& model,
                           const ValidationLimits& limits);

}  // namespace gpuest
