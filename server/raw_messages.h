// File: raw_messages.h
//
// Requests parsed by gpuest rather than by gRPC. On gRPC 1.51's callback API a message
// that does not decode never reaches the method: the call is answered UNIMPLEMENTED with
// an empty message, as if the method did not exist. Every service therefore takes its
// methods raw (WithRawCallbackMethod_*) and decodes here, so that an undecodable request
// is INVALID_ARGUMENT saying what failed, on every method.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace gpuest::server {

// Decodes a request of message's type from bytes; InvalidArgument naming the type, the
// size and why when they are not one (malformed wire data, a field of the wrong wire
// type, a length past the end, invalid UTF-8 in a string field, trailing garbage).
absl::Status DecodeRequest(const grpc::ByteBuffer& bytes,
                           google::protobuf::Message& message);

// The response's wire bytes, for a raw method's output buffer.
void EncodeResponse(const google::protobuf::Message& message, grpc::ByteBuffer& bytes);

}  // namespace gpuest::server
