// File: status_util.h
//
// The single translation from absl::Status to the wire. Handlers call it; nothing else
// in the server knows gRPC status codes. An INVALID_ARGUMENT whose message starts with
// the field's path ("model.layers[3].type: is empty", as every validator writes it)
// also carries that field structurally: google.rpc.BadRequest in a google.rpc.Status,
// the grpc-status-details-bin trailer that rich-error clients read.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace gpuest::server {

grpc::Status ToGrpcStatus(const absl::Status& status);

// A message that starts with a field's path: the path (identifiers joined by '.' or
// indexed by [...]) and what follows it (after an optional " (what)" and ": ").
struct FieldError {
  std::string field;
  std::string description;
};
// nullopt for a message that does not start so.
std::optional<FieldError> FieldOfMessage(absl::string_view message);

// A serialized google.rpc.Status {code, message, details: [Any(google.rpc.BadRequest
// {field_violations: [{field, description}]})]}, written by hand with the messages'
// standard field numbers (proto/google/rpc/bad_request.proto), so that the server links
// no google.rpc descriptor that a program linking googleapis' own would clash with.
std::string BadRequestDetails(int code, absl::string_view message,
                              absl::string_view field, absl::string_view description);

}  // namespace gpuest::server
