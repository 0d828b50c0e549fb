// File: sha256.h
//
// SHA-256 (FIPS 180-4): the digests the manifests record for the datasets a model was
// trained on (lab/) and for each member's weights, which the server checks at
// load. A compact implementation: nothing in the project's stack offers one (OpenSSL
// is not in it, Abseil has none).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuest::common {

// Lower-case hex digest.
std::string Sha256Hex(absl::string_view data);
absl::StatusOr<std::string> Sha256OfFile(const std::string& path);

}  // namespace gpuest::common
