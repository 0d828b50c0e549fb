// File: render.h
//
// What the gpuest CLI prints for people: readable tables of responses.
#pragma once

#include <cstdint>
#include <string>

#include "gpuest/v1/estimate.pb.h"

namespace gpuest::cli {

// "1.5 GiB", "512 MiB", "900 B".
std::string FormatBytes(uint64_t bytes);

std::string RenderEstimate(const v1::EstimateResponse& response,
                           const std::string& model_name, int64_t batch_size);

std::string RenderEstimators(const v1::ListEstimatorsResponse& response);

}  // namespace gpuest::cli
