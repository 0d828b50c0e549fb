#include "client/credentials.h"

#include "absl/strings/str_cat.h"
#include "common/text_file.h"
#include "grpcpp/security/credentials.h"

namespace gpuest::client {

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientTlsOptions& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(tls.cert_file.empty()
                                          ? "tls.cert_file: required with tls.key_file"
                                          : "tls.key_file: required with tls.cert_file");
  }
  if (tls.ca_file.empty()) {
    if (!tls.cert_file.empty()) {
      return absl::InvalidArgumentError(
          "tls.ca_file: required with a client certificate (the CA of the server's)");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  absl::StatusOr<std::string> ca = common::ReadPemFile(tls.ca_file, "tls.ca_file");
  if (!ca.ok()) return ca.status();
  ssl.pem_root_certs = *std::move(ca);
  if (!tls.cert_file.empty()) {
    absl::StatusOr<std::string> cert =
        common::ReadPemFile(tls.cert_file, "tls.cert_file");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = common::ReadPemFile(tls.key_file, "tls.key_file");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace gpuest::client
