// File: credentials.h
//
// The gRPC port's transport credentials, from TlsOptions: TLS with a certificate and
// key, mutual TLS when a client CA is given too (a client without a certificate that
// CA signed is refused in the handshake), plaintext otherwise. Plaintext is for
// loopback: on any other address it is refused unless the options say so, so that a
// server is never exposed unencrypted by accident.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/options.h"

namespace grpc {
class ServerCredentials;
}  // namespace grpc

namespace gpuest::server {

// Whether a listen address (host:port, [v6]:port or unix:path) only accepts
// connections from this machine: 127.0.0.0/8, [::1], localhost, or a Unix socket.
bool IsLoopbackAddress(absl::string_view listen_address);

// InvalidArgument naming the flag for an incomplete or refused configuration;
// NotFound naming the file for an unreadable one.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const std::string& listen_address, const TlsOptions& tls);

// "plaintext", "TLS" or "mutual TLS", for the start-up log.
std::string TransportSecurityName(const TlsOptions& tls);

}  // namespace gpuest::server
