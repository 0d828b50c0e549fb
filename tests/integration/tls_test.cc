// TLS and mutual TLS on the gRPC port: a CA, a server certificate and client
// certificates made here with the openssl CLI, and real handshakes over loopback
// between the real server and the client library (and the CLI).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gpuest/client.h"
#include "gtest/gtest.h"
#include "tests/support/examples.h"
#include "tests/support/pki.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using testing::CommandResult;
using testing::ExampleRequest;
using testing::Pki;
using testing::RunCommand;
using testing::ServerProcess;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new Pki();
    pki_->MakeCa("ca");
    pki_->MakeCa("other-ca");
    pki_->MakeLeaf("server", "ca", "IP:127.0.0.1,DNS:localhost");
    pki_->MakeLeaf("client", "ca", "DNS:scheduler");
    pki_->MakeLeaf("impostor", "other-ca", "DNS:scheduler");
  }
  static void TearDownTestSuite() { delete pki_; }

  static std::string P(const std::string& name) { return pki_->Path(name); }

  static std::vector<std::string> TlsFlags() {
    return {"--tls-cert=" + P("server.pem"), "--tls-key=" + P("server.key")};
  }
  static std::vector<std::string> MutualTlsFlags() {
    std::vector<std::string> flags = TlsFlags();
    flags.push_back("--tls-client-ca=" + P("ca.pem"));
    return flags;
  }

  // An Estimate of examples/cnn.json with these client credentials; a generous
  // deadline so that only the handshake decides.
  static absl::Status EstimateWith(const ServerProcess& server,
                                   const ClientTlsOptions& tls) {
    ClientOptions options;
    options.targets = {server.target()};
    options.default_deadline = absl::Seconds(10);
    options.max_attempts = 1;
    options.tls = tls;
    auto client = Client::Create(options);
    if (!client.ok()) return client.status();
    auto response = (*client)->Estimate(ExampleRequest("cnn.json"));
    if (!response.ok()) return response.status();
    if (response->results_size() == 0 || response->recommendation().memory_bytes() == 0) {
      return absl::InternalError("an empty answer");
    }
    return absl::OkStatus();
  }

  static Pki* pki_;
};
Pki* TlsTest::pki_ = nullptr;

TEST_F(TlsTest, TlsServerAnswersAClientThatTrustsItsCa) {
  auto server = ServerProcess::Start(TlsFlags());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(absl::StrContains((*server)->Log(), "gRPC transport: TLS"))
      << (*server)->Log();
  EXPECT_TRUE(EstimateWith(**server, {P("ca.pem"), "", ""}).ok());
}

TEST_F(TlsTest, TlsServerRefusesPlaintextAndUntrustingClients) {
  auto server = ServerProcess::Start(TlsFlags());
  ASSERT_TRUE(server.ok()) << server.status();
  const absl::Status plaintext = EstimateWith(**server, {});
  EXPECT_EQ(plaintext.code(), absl::StatusCode::kUnavailable) << plaintext;
  // A client that trusts another CA does not accept the server's certificate.
  const absl::Status wrong_ca = EstimateWith(**server, {P("other-ca.pem"), "", ""});
  EXPECT_EQ(wrong_ca.code(), absl::StatusCode::kUnavailable) << wrong_ca;
}

TEST_F(TlsTest, MutualTlsAcceptsOnlyClientsWithACertificateFromTheClientCa) {
  auto server = ServerProcess::Start(MutualTlsFlags());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(absl::StrContains((*server)->Log(), "gRPC transport: mutual TLS"))
      << (*server)->Log();
  const absl::Status good =
      EstimateWith(**server, {P("ca.pem"), P("client.pem"), P("client.key")});
  EXPECT_TRUE(good.ok()) << good;

  const absl::Status no_cert = EstimateWith(**server, {P("ca.pem"), "", ""});
  EXPECT_EQ(no_cert.code(), absl::StatusCode::kUnavailable) << no_cert;
  const absl::Status impostor =
      EstimateWith(**server, {P("ca.pem"), P("impostor.pem"), P("impostor.key")});
  EXPECT_EQ(impostor.code(), absl::StatusCode::kUnavailable) << impostor;
  const absl::Status plaintext = EstimateWith(**server, {});
  EXPECT_EQ(plaintext.code(), absl::StatusCode::kUnavailable) << plaintext;
}

TEST_F(TlsTest, CliTalksMutualTls) {
  auto server = ServerProcess::Start(MutualTlsFlags());
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<std::string> base = {GPUEST_CLI_PATH, "--target", (*server)->target(),
                                         "--timeout", "10s"};
  std::vector<std::string> with_cert = base;
  for (const std::string& flag :
       {"--tls-ca=" + P("ca.pem"), "--tls-cert=" + P("client.pem"),
        "--tls-key=" + P("client.key")}) {
    with_cert.push_back(flag);
  }
  with_cert.push_back("health");
  const CommandResult ok = RunCommand(with_cert);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(absl::StrContains(ok.out, "SERVING")) << ok.out;

  // Refused, the client waits for a server it can reach up to the deadline: a short one.
  std::vector<std::string> without_cert = {GPUEST_CLI_PATH, "--target",
                                           (*server)->target(), "--timeout", "1s"};
  without_cert.push_back("--tls-ca=" + P("ca.pem"));
  without_cert.push_back("health");
  const CommandResult refused = RunCommand(without_cert);
  EXPECT_EQ(refused.exit_code, 3) << refused.out << refused.err;
}

// Plaintext stays the loopback default; on any other address the server refuses to
// start unencrypted unless told so.
TEST_F(TlsTest, PlaintextOnANonLoopbackAddressNeedsItsFlag) {
  auto refused = ServerProcess::Start({"--listen=0.0.0.0:0"});
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--plaintext-non-loopback"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "exited with 1"))
      << refused.status();

  auto allowed = ServerProcess::Start({"--listen=0.0.0.0:0", "--plaintext-non-loopback"});
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_TRUE(EstimateWith(**allowed, {}).ok());

  auto with_tls =
      ServerProcess::Start({"--listen=0.0.0.0:0", "--tls-cert=" + P("server.pem"),
                            "--tls-key=" + P("server.key")});
  ASSERT_TRUE(with_tls.ok()) << with_tls.status();
  EXPECT_TRUE(EstimateWith(**with_tls, {P("ca.pem"), "", ""}).ok());
}

TEST_F(TlsTest, IncompleteOrUnreadableTlsSettingsAreRefusedNamingTheFlag) {
  struct Case {
    std::vector<std::string> flags;
    std::string names;
  };
  const std::vector<Case> cases = {
      {{"--tls-cert=" + P("server.pem")}, "--tls-key"},
      {{"--tls-key=" + P("server.key")}, "--tls-cert"},
      {{"--tls-client-ca=" + P("ca.pem")}, "--tls-client-ca"},
      {{"--tls-cert=/nonexistent/server.pem", "--tls-key=" + P("server.key")},
       "/nonexistent/server.pem"},
      {{"--tls-cert=" + P("server.ext"), "--tls-key=" + P("server.key")},
       "is not a PEM file"},
  };
  for (const Case& c : cases) {
    auto server = ServerProcess::Start(c.flags);
    ASSERT_FALSE(server.ok()) << c.names;
    EXPECT_TRUE(absl::StrContains(server.status().message(), c.names)) << server.status();
  }
  ClientOptions options;
  options.tls = {"", P("client.pem"), P("client.key")};
  EXPECT_TRUE(
      absl::StrContains(Client::Create(options).status().message(), "tls.ca_file"));
  options.tls = {"/nonexistent/ca.pem", "", ""};
  EXPECT_EQ(Client::Create(options).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpuest
