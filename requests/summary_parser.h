// File: summary_parser.h
//
// Turns the model-summary text people already print into a ModelDescription:
//
//  - torchsummary (`torchsummary.summary(model, input_size)`, and GPUMemNet's real-model
//    files): a flat table "Layer (type) | Output Shape | Param #" with rows like
//    `Conv2d-1   [-1, 64, 112, 112]   9,408`, then "Total params: ...".
//  - torchinfo (`torchinfo.summary(model, input_size=...)`): a tree
//    "Layer (type:depth-idx) | ... | Output Shape | ... | Param # | ..." with rows like
//    `│    └─ReLU: 2-3   [2, 64, 56, 56]   --`, Unicode or ASCII tree, any column set
//    that includes Output Shape and Param #.
//
// What the description holds: layers in table order with type (the class name), output
// activations per sample (the product of each output shape without its first, batch,
// dimension; summed over the shapes of a row that prints several) and parameters
// ("--" and "(recursive)" are 0, a frozen "(1,234)" is 1,234). family is left
// UNSPECIFIED (the server infers it), batch_size and name are left for the caller: the
// batch dimension in a summary is whatever the summary was run with (-1, or often 1),
// not the training batch. input_shape is set only from torchinfo's Input Shape column
// of the top-level model row (without its batch dimension); otherwise it stays empty.
//
// Which rows become layers:
//  - torchsummary: every row. The format is flat, so a composite block that torchsummary
//    hooks (ResNet's Bottleneck, printed after its children with 0 parameters) also
//    becomes a layer; its type is then unknown to the server, which says so.
//  - torchinfo: a row is a layer when the next row is not deeper (a leaf, or a row at the
//    summary's depth limit that stands for its hidden children and prints their
//    parameters), and also a container that prints parameters of its own
//    (MultiheadAttention's in_proj, a model's top-level nn.Parameter), so that the
//    layers' parameters add up to "Total params". Containers without parameters of their
//    own (Sequential, ModuleList, Bottleneck...) are not layers. Per-parameter detail
//    rows (verbose mode: `└─weight` with no output shape) are skipped.
//
// Checks: the header, each row's shape and count, the closing rule and the totals must
// all be there; the rows' parameters must add up to "Total params" (torchsummary's
// total is the sum of its rows; torchinfo's is the sum of the leaves plus each
// container's own parameters, which is what the layers above carry; a table from an
// older torchinfo whose container rows repeat their children's sum is recognised by its
// leaves alone matching the total). Anything else is InvalidArgument naming the line:
// "summary.txt line 37: ...". One summary per text: a second table is an error.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::requests {

enum class SummaryFormat { kTorchsummary, kTorchinfo };

// Detects the format from the table header (torchsummary indents "Layer (type)",
// torchinfo starts the line with it) and parses. source_name prefixes every error.
absl::StatusOr<v1::ModelDescription> ParseModelSummary(absl::string_view text,
                                                       absl::string_view source_name);

// One format, whatever the header looks like; the header must still be there.
absl::StatusOr<v1::ModelDescription> ParseModelSummaryAs(SummaryFormat format,
                                                         absl::string_view text,
                                                         absl::string_view source_name);

}  // namespace gpuest::requests
