// File: model_family.h
//
// Model families in words, in one place: the ModelFamily enum's value names without
// their prefix, lower-cased ("mlp", "cnn", "transformer", "other"), and "any" for
// MODEL_FAMILY_UNSPECIFIED. Manifests, flags, logs, messages and the CLI use these.
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::common {

// "mlp", "cnn", "transformer", "other"; "any" for UNSPECIFIED and unknown values.
const std::string& FamilyName(v1::ModelFamily family);

// The family a name spells ("cnn" -> MODEL_FAMILY_CNN); nullopt for anything else,
// "any" included: a name always means one concrete family.
std::optional<v1::ModelFamily> FamilyFromName(absl::string_view name);

}  // namespace gpuest::common
