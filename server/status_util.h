// File: status_util.h
//
// The single translation from absl::Status to the wire. Handlers call it; nothing else
// in the server knows gRPC status codes.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace gpuest {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace gpuest
