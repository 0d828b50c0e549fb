// server/credentials: the gRPC port's transport security from its flags: plaintext
// only on loopback unless asked, TLS with a certificate and key, mutual TLS with a
// client CA; an incomplete or unreadable configuration refused naming the flag.
#include "server/credentials.h"

#include "absl/strings/match.h"
#include "common/text_file.h"
#include "grpcpp/security/server_credentials.h"
#include "gtest/gtest.h"
#include "server/options.h"
#include "tests/support/pki.h"

namespace gpuest::server {
namespace {

TEST(Credentials, LoopbackIsThisMachineOnly) {
  for (const char* address : {"127.0.0.1:50051", "127.8.9.10:1", "localhost:80",
                              "[::1]:50051", "unix:/run/gpuest.sock"}) {
    EXPECT_TRUE(IsLoopbackAddress(address)) << address;
  }
  for (const char* address : {"0.0.0.0:50051", "[::]:50051", "10.0.0.1:1", "128.0.0.1:1",
                              "localhost.example.com:1", "127.0.0:1"}) {
    EXPECT_FALSE(IsLoopbackAddress(address)) << address;
  }
}

TEST(Credentials, PlaintextIsForLoopbackUnlessAskedFor) {
  TlsOptions tls;
  EXPECT_EQ(TransportSecurityName(tls), "plaintext");
  auto loopback = ServerCredentialsFor("127.0.0.1:50051", tls);
  ASSERT_TRUE(loopback.ok()) << loopback.status();
  EXPECT_NE(*loopback, nullptr);
  const absl::Status exposed = ServerCredentialsFor("0.0.0.0:50051", tls).status();
  EXPECT_EQ(exposed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(exposed.message(),
                               "--listen=0.0.0.0:50051 is not a loopback address"))
      << exposed;
  tls.plaintext_non_loopback = true;
  EXPECT_TRUE(ServerCredentialsFor("0.0.0.0:50051", tls).ok());
}

TEST(Credentials, AnIncompleteTlsConfigurationNamesTheFlag) {
  TlsOptions tls;
  tls.cert_file = "server.pem";
  EXPECT_EQ(ServerCredentialsFor("127.0.0.1:1", tls).status().message(),
            "--tls-key: required with --tls-cert");
  tls = TlsOptions();
  tls.key_file = "server.key";
  EXPECT_EQ(ServerCredentialsFor("127.0.0.1:1", tls).status().message(),
            "--tls-cert: required with --tls-key");
  tls = TlsOptions();
  tls.client_ca_file = "ca.pem";
  EXPECT_TRUE(absl::StartsWith(
      ServerCredentialsFor("127.0.0.1:1", tls).status().message(), "--tls-client-ca:"));
  tls.cert_file = "/nonexistent/server.pem";
  tls.key_file = "/nonexistent/server.key";
  const absl::Status missing = ServerCredentialsFor("127.0.0.1:1", tls).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StartsWith(missing.message(), "--tls-key: ")) << missing;
}

TEST(Credentials, ACertificateAndKeyAreTlsAndAClientCaMutualTls) {
  testing::Pki pki;
  pki.MakeCa("ca");
  pki.MakeLeaf("server", "ca", "IP:127.0.0.1");
  TlsOptions tls;
  tls.cert_file = pki.Path("server.pem");
  tls.key_file = pki.Path("server.key");
  EXPECT_EQ(TransportSecurityName(tls), "TLS");
  auto plain_tls = ServerCredentialsFor("0.0.0.0:1", tls);
  ASSERT_TRUE(plain_tls.ok()) << plain_tls.status();
  EXPECT_NE(*plain_tls, nullptr);
  tls.client_ca_file = pki.Path("ca.pem");
  EXPECT_EQ(TransportSecurityName(tls), "mutual TLS");
  EXPECT_TRUE(ServerCredentialsFor("0.0.0.0:1", tls).ok());
  // A CA bundle that is not PEM is refused naming the flag and the file.
  const std::string not_pem = pki.Path("not.pem");
  ASSERT_TRUE(common::WriteTextFile(not_pem, "not a certificate\n").ok());
  tls.client_ca_file = not_pem;
  const absl::Status refused = ServerCredentialsFor("0.0.0.0:1", tls).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "--tls-client-ca: " + not_pem + " is not a PEM file");
}

}  // namespace
}  // namespace gpuest::server
