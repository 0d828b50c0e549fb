// File: torch_device.h
//
// Which device the ML estimators load onto, and libtorch's process-wide settings for
// a server. Behind this door so that only one translation unit of the server includes
// libtorch.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace gpuest::core {

// "auto" -> "cuda" when libtorch sees a CUDA device, else "cpu"; "cuda" without one is
// an error; "cpu" is always "cpu".
absl::StatusOr<std::string> ResolveDevice(const std::string& requested);

// One intra-op thread per libtorch call, process-wide: a server's worker pool is its
// parallelism, and a pool of threads per call would fight it. Call once, before
// loading models.
void UseOneIntraOpThread();

}  // namespace gpuest::core
