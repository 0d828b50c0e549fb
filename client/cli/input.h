// File: input.h
//
// Reads what `gpuest estimate` is given, from a file or stdin: a ModelDescription in its
// JSON form, a whole EstimateRequest, or a model summary printed by torchsummary or
// torchinfo (anything whose first non-space character is not '{').
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest::cli {

struct ReadOptions {
  // Training batch size; 0 keeps the file's. A summary does not say it (its batch
  // dimension is whatever the summary was run with), so a summary needs one here.
  int64_t batch_size = 0;
};

// path "-" reads stdin. NotFound when the file cannot be read; InvalidArgument, naming
// the file (and for a summary the line) and the parser's complaint, when it is none of
// the forms, when a summary comes without options.batch_size, or when
// options.batch_size differs from the batch a description's trace was recorded at (a
// trace answers for its own batch only; the message says how to describe it again). A
// summary's model is named after the file's base name.
absl::StatusOr<v1::EstimateRequest> ReadRequest(const std::string& path,
                                                const ReadOptions& options = {});

// ReadRequest on text already in hand (a pod annotation, stdin read once); name stands
// for the file in errors.
absl::StatusOr<v1::EstimateRequest> ParseRequestText(const std::string& text,
                                                     const std::string& name,
                                                     const ReadOptions& options = {});

}  // namespace gpuest::cli
