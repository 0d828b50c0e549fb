// client/credentials: the client channel's credentials from ClientTlsOptions:
// plaintext, TLS with the server's CA, mutual TLS with a certificate and key too; an
// incomplete configuration refused naming the field, an unreadable file naming it.
#include "client/credentials.h"

#include "absl/strings/match.h"
#include "common/text_file.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/pki.h"

namespace gpuest::client {
namespace {

TEST(ClientCredentials, NothingGivenIsPlaintext) {
  auto plain = ChannelCredentialsFor(ClientTlsOptions{});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_NE(*plain, nullptr);
}

TEST(ClientCredentials, AnIncompleteConfigurationNamesTheField) {
  ClientTlsOptions tls;
  tls.cert_file = "client.pem";
  EXPECT_EQ(ChannelCredentialsFor(tls).status().message(),
            "tls.key_file: required with tls.cert_file");
  tls = ClientTlsOptions();
  tls.key_file = "client.key";
  EXPECT_EQ(ChannelCredentialsFor(tls).status().message(),
            "tls.cert_file: required with tls.key_file");
  tls.cert_file = "client.pem";
  const absl::Status no_ca = ChannelCredentialsFor(tls).status();
  EXPECT_EQ(no_ca.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(no_ca.message(), "tls.ca_file: required")) << no_ca;
  tls.ca_file = "/nonexistent/ca.pem";
  const absl::Status missing = ChannelCredentialsFor(tls).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StartsWith(missing.message(), "tls.ca_file: ")) << missing;
}

TEST(ClientCredentials, TheServersCaIsTlsAndAClientCertificateMutualTls) {
  testing::Pki pki;
  pki.MakeCa("ca");
  pki.MakeLeaf("client", "ca", "DNS:client");
  ClientTlsOptions tls;
  tls.ca_file = pki.Path("ca.pem");
  auto server_only = ChannelCredentialsFor(tls);
  ASSERT_TRUE(server_only.ok()) << server_only.status();
  EXPECT_NE(*server_only, nullptr);
  tls.cert_file = pki.Path("client.pem");
  tls.key_file = pki.Path("client.key");
  EXPECT_TRUE(ChannelCredentialsFor(tls).ok());
  // Each file is read as PEM, and one that is not is refused naming its field.
  const std::string not_pem = pki.Path("not.pem");
  ASSERT_TRUE(common::WriteTextFile(not_pem, "not a key\n").ok());
  tls.key_file = not_pem;
  EXPECT_EQ(ChannelCredentialsFor(tls).status().message(),
            "tls.key_file: " + not_pem + " is not a PEM file");
}

}  // namespace
}  // namespace gpuest::client
