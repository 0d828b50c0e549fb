// File: input.h
//
// Reads what `gpuest estimate` is given: a ModelDescription in its JSON form, or a
// whole EstimateRequest, from a file or stdin.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "gpuest/v1/estimate.pb.h"

namespace gpuest::cli {

// path "-" reads stdin. NotFound when the file cannot be read; InvalidArgument, naming
// the file and the parser's complaint, when it is neither form.
absl::StatusOr<v1::EstimateRequest> ReadRequest(const std::string& path);

}  // namespace gpuest::cli
