#include "client/credentials.h"

#include "common/pem_files.h"
#include "common/status_macros.h"
#include "grpcpp/security/credentials.h"

namespace gpuest::client {

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(
    const ClientTlsOptions& tls) {
  GPUEST_RETURN_IF_ERROR(common::CheckCertAndKey({tls.cert_file, "tls.cert_file"},
                                                 {tls.key_file, "tls.key_file"}));
  if (tls.ca_file.empty()) {
    if (!tls.cert_file.empty()) {
      return absl::InvalidArgumentError(
          "tls.ca_file: required with a client certificate (the CA of the server's)");
    }
    return grpc::InsecureChannelCredentials();
  }
  grpc::SslCredentialsOptions ssl;
  GPUEST_RETURN_IF_ERROR(
      common::ReadPemFiles({{tls.ca_file, "tls.ca_file", &ssl.pem_root_certs},
                            {tls.cert_file, "tls.cert_file", &ssl.pem_cert_chain},
                            {tls.key_file, "tls.key_file", &ssl.pem_private_key}}));
  return grpc::SslCredentials(ssl);
}

}  // namespace gpuest::client
