// File: torch_device.h
//
// Which device the ML estimators load onto. Behind this door so that only one
// translation unit of the server includes libtorch.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace gpuest {

// "auto" -> "cuda" when libtorch sees a CUDA device, else "cpu"; "cuda" without one is
// an error; "cpu" is always "cpu".
absl::StatusOr<std::string> ResolveDevice(const std::string& requested);

}  // namespace gpuest
