// File: credentials.h
//
// The client channel's credentials from ClientTlsOptions (gpuest/tls.h): plaintext,
// TLS or mutual TLS. Internal to the client library.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "gpuest/tls.h"

namespace grpc {
class ChannelCredentials;
}  // namespace grpc

namespace gpuest::client {

// InvalidArgument naming the field for an incomplete configuration; NotFound naming
// the file for an unreadable one.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientTlsOptions& tls);

}  // namespace gpuest::client
