// File: render.h
//
// What the gpuest CLI prints: readable tables of responses for people, and the
// responses' JSON for programs (--json).
#pragma once

#include <cstdint>
#include <string>

#include "google/protobuf/message.h"
#include "gpuest/v1/estimate.pb.h"
#include "gpuest/v1/placement.pb.h"

namespace gpuest::cli {

// "1.5 GiB", "512 MiB", "900 B".
std::string FormatBytes(uint64_t bytes);

std::string RenderEstimate(const v1::EstimateResponse& response,
                           const std::string& model_name, int64_t batch_size);

std::string RenderEstimators(const v1::ListEstimatorsResponse& response);

// `gpuest place`: the fit line, one row per job (memory, utilization and its source,
// predicted speed with its interval, verdict, confidence), the reasons, the warnings.
std::string RenderPlacement(const v1::CheckPlacementResponse& response);

// `gpuest rank`: one row per GPU in the server's order.
std::string RenderRanking(const v1::RankGpusResponse& response);

// The protobuf JSON mapping of message, indented, with every scalar field printed even
// at its default: a scheduler reading `"fits": false`, a zero headroom or an empty
// warning list must find the key, not guess from its absence.
std::string RenderJson(const google::protobuf::Message& message);

}  // namespace gpuest::cli
