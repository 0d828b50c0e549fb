// File: summary_text.h
//
// A described model's layers as torchsummary prints them (`torchsummary.summary`):
// each layer's type, its output shape per sample and its parameters, with the totals,
// and nothing else: no module names and no inputs. The goal table sends the text
// through the server's own parser (requests/summary_parser.h) to score what a
// summary alone lets the layer rule say.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::calibration {

std::string RenderTorchsummary(const v1::ModelDescription& model);

// The model as a request built from its torchsummary text would describe it: the
// layers as the parser reads them back; the job's settings (batch, dtype, optimizer,
// input shape, sequence length, stack) as the caller gives them; no trace, no family
// (the server infers it).
absl::StatusOr<v1::ModelDescription> AsSummarised(const v1::ModelDescription& model);

}  // namespace gpuest::calibration
