// File: proto_json_fields.h
//
// Protobuf's JSON parser (3.21) reads a field under its JSON name and its proto name
// ("batchSize", "batch_size") and, given both, keeps the last, or appends a repeated
// field's two lists. json_guard.h already refuses a key written twice; this refuses one
// field written under two names, so that what the server answers is what the sender
// meant, not whichever spelling came last.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"

namespace gpuest::requests {

// The field protobuf's JSON parser reads key as (its JSON name or its proto name), or
// null.
const google::protobuf::FieldDescriptor* JsonField(
    const google::protobuf::Descriptor& type, absl::string_view key);

// OK, or INVALID_ARGUMENT naming what, where, and both spellings, when an object in
// json_text (read as a message of type) sets one field twice. Text that is not JSON
// passes: protobuf's parser says what is wrong with it.
absl::Status CheckEachFieldOnce(absl::string_view json_text,
                                const google::protobuf::Descriptor& type,
                                absl::string_view what);

}  // namespace gpuest::requests
