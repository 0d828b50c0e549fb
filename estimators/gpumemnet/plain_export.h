// File: plain_export.h
//
// Copies a GPUMemNet member out of its libtorch module into a PlainNet
// (plain_forward.h) and checks that the two agree. Includes <torch/torch.h> through
// networks.h: only the served estimator's .cc includes it.
#pragma once

#include "absl/status/statusor.h"
#include "estimators/gpumemnet/networks.h"
#include "estimators/gpumemnet/plain_forward.h"

namespace gpuest::gpumemnet {

// The member's weights as a PlainNet, after checking on a probe input (every token
// type, enough tokens for the attention loops' blocks and their remainder) that
// PlainForward gives the module's logits to 1e-3 relative. An error says which logit
// disagrees. May throw c10::Error, as libtorch does. The holder shares the module.
absl::StatusOr<PlainNet> ExportPlainNet(GpuMemNet net);

}  // namespace gpuest::gpumemnet
