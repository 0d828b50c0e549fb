#include "server/credentials.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/pem_files.h"
#include "common/status_macros.h"
#include "grpcpp/security/server_credentials.h"

namespace gpuest::server {
namespace {

// The host of host:port or [host]:port.
absl::string_view HostOf(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    return close == absl::string_view::npos ? address : address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == absl::string_view::npos ? address : address.substr(0, colon);
}

}  // namespace

bool IsLoopbackAddress(absl::string_view listen_address) {
  if (absl::StartsWith(listen_address, "unix:")) return true;
  const absl::string_view host = HostOf(listen_address);
  if (host == "localhost" || host == "::1") return true;
  const std::vector<absl::string_view> octets = absl::StrSplit(host, '.');
  int first = 0;
  return octets.size() == 4 && absl::SimpleAtoi(octets[0], &first) && first == 127;
}

std::string TransportSecurityName(const TlsOptions& tls) {
  if (tls.cert_file.empty()) return "plaintext";
  return tls.client_ca_file.empty() ? "TLS" : "mutual TLS";
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentialsFor(
    const std::string& listen_address, const TlsOptions& tls) {
  GPUEST_RETURN_IF_ERROR(common::CheckCertAndKey({tls.cert_file, "--tls-cert"},
                                                 {tls.key_file, "--tls-key"}));
  if (tls.cert_file.empty()) {
    if (!tls.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca: needs --tls-cert and --tls-key (mutual TLS is TLS first)");
    }
    if (!tls.plaintext_non_loopback && !IsLoopbackAddress(listen_address)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen=", listen_address,
          " is not a loopback address: give --tls-cert and --tls-key (and "
          "--tls-client-ca for mutual TLS), or --plaintext-non-loopback to serve it "
          "unencrypted on purpose"));
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  GPUEST_RETURN_IF_ERROR(common::ReadPemFiles(
      {{tls.key_file, "--tls-key", &pair.private_key},
       {tls.cert_file, "--tls-cert", &pair.cert_chain},
       {tls.client_ca_file, "--tls-client-ca", &ssl.pem_root_certs}}));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  ssl.client_certificate_request =
      tls.client_ca_file.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  return grpc::SslServerCredentials(ssl);
}

}  // namespace gpuest::server
