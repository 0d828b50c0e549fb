// client/gpuest/client: the public gpuest::Client against fake gpuest.v1 services in
// the test process (real gRPC servers on loopback whose answers, failures and delays
// the test sets): the target list as the channel takes it, the options Create
// refuses, each call reaching its service and coming back, round robin over several
// servers, gRPC codes as absl codes, the deadline sent and kept, the retry policy
// (client_policy.json's maxAttempts, read through PolicyMaxAttempts), waiting for a
// server that is not up yet, the async call, the message size bound and health.
#include "gpuest/client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gpuest/v1/estimate.grpc.pb.h"
#include "gpuest/v1/placement.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"

namespace gpuest {
namespace {

// What a fake server does with each call, and what it saw. Thread-safe.
struct Script {
  absl::Mutex mu;
  // The first fail_first attempts answer fail_code with fail_message; later ones OK.
  int fail_first ABSL_GUARDED_BY(mu) = 0;
  grpc::StatusCode fail_code ABSL_GUARDED_BY(mu) = grpc::StatusCode::UNAVAILABLE;
  std::string fail_message ABSL_GUARDED_BY(mu) = "scripted failure";
  absl::Duration delay ABSL_GUARDED_BY(mu);  // Before answering.
  size_t padding ABSL_GUARDED_BY(mu) = 0;    // Bytes added to an Estimate response.
  int attempts ABSL_GUARDED_BY(mu) = 0;
  absl::Duration deadline_left ABSL_GUARDED_BY(mu);  // The last call's, at its arrival.

  void FailFirst(int n, grpc::StatusCode code, const std::string& message = "") {
    absl::MutexLock lock(&mu);
    fail_first = n;
    fail_code = code;
    fail_message = message.empty() ? "scripted failure" : message;
  }
  int Attempts() {
    absl::MutexLock lock(&mu);
    return attempts;
  }
  // One attempt: its failure, or OK after the delay.
  grpc::Status Attempt(grpc::ServerContext* context) {
    absl::Duration wait;
    {
      absl::MutexLock lock(&mu);
      deadline_left = absl::FromChrono(context->deadline()) - absl::Now();
      if (attempts++ < fail_first) return grpc::Status(fail_code, fail_message);
      wait = delay;
    }
    absl::SleepFor(wait);
    return grpc::Status::OK;
  }
};

// gpuest.v1.Estimator and gpuest.v1.Placement answering what the request asked, so
// that the test sees the request arrived: the GPU names come back, and the server's
// name as models_version.
class FakeEstimator final : public v1::Estimator::Service {
 public:
  FakeEstimator(std::string name, Script& script)
      : name_(std::move(name)), script_(script) {}
  grpc::Status Estimate(grpc::ServerContext* context, const v1::EstimateRequest* request,
                        v1::EstimateResponse* response) override {
    grpc::Status status = script_.Attempt(context);
    if (!status.ok()) return status;
    response->set_models_version(name_);
    response->mutable_recommendation()->set_estimator_id(request->gpu());
    absl::MutexLock lock(&script_.mu);
    response->mutable_recommendation()->set_basis(std::string(script_.padding, 'x'));
    return grpc::Status::OK;
  }
  grpc::Status ListEstimators(grpc::ServerContext* context,
                              const v1::ListEstimatorsRequest*,
                              v1::ListEstimatorsResponse* response) override {
    grpc::Status status = script_.Attempt(context);
    if (status.ok()) response->set_models_version(name_);
    return status;
  }

 private:
  const std::string name_;
  Script& script_;
};

class FakePlacement final : public v1::Placement::Service {
 public:
  explicit FakePlacement(Script& script) : script_(script) {}
  grpc::Status CheckPlacement(grpc::ServerContext* context,
                              const v1::CheckPlacementRequest* request,
                              v1::CheckPlacementResponse* response) override {
    grpc::Status status = script_.Attempt(context);
    if (status.ok()) response->set_gpu(request->gpu().catalog_id());
    return status;
  }
  grpc::Status RankGpus(grpc::ServerContext* context, const v1::RankGpusRequest* request,
                        v1::RankGpusResponse* response) override {
    grpc::Status status = script_.Attempt(context);
    for (const std::string& gpu : request->gpus()) response->add_gpus()->set_gpu(gpu);
    return status;
  }

 private:
  Script& script_;
};

// One fake server on 127.0.0.1 (port 0: any).
class FakeServer {
 public:
  explicit FakeServer(const std::string& name, int port = 0)
      : estimator_(name, script), placement_(script) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", port),
                             grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&estimator_);
    builder.RegisterService(&placement_);
    server_ = builder.BuildAndStart();
  }
  ~FakeServer() { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

  bool started() const { return server_ != nullptr && port_ > 0; }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }
  grpc::HealthCheckServiceInterface& health() {
    return *server_->GetHealthCheckService();
  }

  Script script;

 private:
  FakeEstimator estimator_;
  FakePlacement placement_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// A loopback port nothing listens on (bound, then closed).
int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(address.sin_port);
}

std::unique_ptr<Client> ClientOf(std::vector<std::string> targets,
                                 int max_attempts = PolicyMaxAttempts()) {
  ClientOptions options;
  options.targets = std::move(targets);
  options.max_attempts = max_attempts;
  auto client = Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

v1::EstimateRequest On(const std::string& gpu) {
  v1::EstimateRequest request;
  request.set_gpu(gpu);
  return request;
}

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { grpc::EnableDefaultHealthCheckService(true); }
};

TEST_F(ClientTest, CreateRefusesUnusableOptionsNamingTheField) {
  auto refused = [](const ClientOptions& options, absl::StatusCode code,
                    const std::string& says) {
    auto client = Client::Create(options);
    ASSERT_FALSE(client.ok()) << says;
    EXPECT_EQ(client.status().code(), code) << client.status();
    EXPECT_TRUE(absl::StrContains(client.status().message(), says)) << client.status();
  };
  ClientOptions options;
  options.targets = {};
  refused(options, absl::StatusCode::kInvalidArgument, "targets: at least one");
  options.targets = {"127.0.0.1:1", ""};
  refused(options, absl::StatusCode::kInvalidArgument, "targets[1]: is empty");
  options.targets = {"127.0.0.1:1", "gpuest.svc:50051"};
  refused(options, absl::StatusCode::kInvalidArgument,
          "several targets must all be IPv4 or all [IPv6]");
  options.targets = {"127.0.0.1:1", "[::1]:2"};
  refused(options, absl::StatusCode::kInvalidArgument,
          "several targets must all be IPv4 or all [IPv6]");

  options = ClientOptions();
  options.default_deadline = absl::ZeroDuration();
  refused(options, absl::StatusCode::kInvalidArgument, "default_deadline");
  options = ClientOptions();
  options.max_attempts = 0;
  refused(options, absl::StatusCode::kInvalidArgument, "max_attempts");

  options = ClientOptions();
  options.tls.key_file = "/tmp/key.pem";
  refused(options, absl::StatusCode::kInvalidArgument,
          "tls.cert_file: required with tls.key_file");
  options = ClientOptions();
  options.tls.ca_file = "/nonexistent/ca.pem";
  refused(options, absl::StatusCode::kNotFound, "tls.ca_file");
}

TEST_F(ClientTest, OneChannelTargetForTheWholeList) {
  auto target_of = [](std::vector<std::string> targets) -> std::string {
    ClientOptions options;
    options.targets = std::move(targets);
    auto client = Client::Create(options);  // Does not connect.
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? (*client)->channel_target() : "";
  };
  EXPECT_EQ(target_of({"127.0.0.1:50051"}), "127.0.0.1:50051");
  EXPECT_EQ(target_of({"dns:///gpuest.svc:50051"}), "dns:///gpuest.svc:50051");
  EXPECT_EQ(target_of({"10.0.0.1:1", "10.0.0.2:2"}), "ipv4:10.0.0.1:1,10.0.0.2:2");
  EXPECT_EQ(target_of({"[::1]:1", "[fe80::1]:2"}), "ipv6:[::1]:1,[fe80::1]:2");
}

TEST_F(ClientTest, EachCallReachesItsServiceAndComesBack) {
  FakeServer server("server-a");
  ASSERT_TRUE(server.started());
  auto client = ClientOf({server.target()});
  ASSERT_NE(client, nullptr);

  auto estimate = client->Estimate(On("a100-80gb"));
  ASSERT_TRUE(estimate.ok()) << estimate.status();
  EXPECT_EQ(estimate->models_version(), "server-a");
  EXPECT_EQ(estimate->recommendation().estimator_id(), "a100-80gb");

  auto list = client->ListEstimators();
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->models_version(), "server-a");

  v1::CheckPlacementRequest check;
  check.mutable_gpu()->set_catalog_id("h100-80gb");
  auto checked = client->CheckPlacement(check);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->gpu(), "h100-80gb");

  v1::RankGpusRequest rank;
  rank.add_gpus("a10");
  rank.add_gpus("l4");
  auto ranked = client->RankGpus(rank);
  ASSERT_TRUE(ranked.ok()) << ranked.status();
  ASSERT_EQ(ranked->gpus_size(), 2);
  EXPECT_EQ(ranked->gpus(1).gpu(), "l4");
  EXPECT_EQ(server.script.Attempts(), 4);
}

TEST_F(ClientTest, CallsAreSpreadOverEveryTarget) {
  FakeServer a("server-a"), b("server-b");
  ASSERT_TRUE(a.started() && b.started());
  auto client = ClientOf({a.target(), b.target()});
  ASSERT_NE(client, nullptr);
  std::map<std::string, int> served;
  for (int i = 0; i < 20; ++i) {
    auto r = client->Estimate(On("a10"));
    ASSERT_TRUE(r.ok()) << r.status();
    ++served[r->models_version()];
  }
  EXPECT_GT(served["server-a"], 0);
  EXPECT_GT(served["server-b"], 0);
  EXPECT_EQ(a.script.Attempts() + b.script.Attempts(), 20);
}

TEST_F(ClientTest, TheServersCodesComeBackAsAbslCodesWithTheirMessagesUnretried) {
  FakeServer server("server-a");
  ASSERT_TRUE(server.started());
  auto client = ClientOf({server.target()});
  ASSERT_NE(client, nullptr);
  for (const grpc::StatusCode code :
       {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::NOT_FOUND,
        grpc::StatusCode::FAILED_PRECONDITION, grpc::StatusCode::RESOURCE_EXHAUSTED,
        grpc::StatusCode::INTERNAL, grpc::StatusCode::UNIMPLEMENTED}) {
    const absl::StatusCode expected = static_cast<absl::StatusCode>(code);
    SCOPED_TRACE(absl::StatusCodeToString(expected));
    const int before = server.script.Attempts();
    const std::string message = absl::StrCat("why: ", absl::StatusCodeToString(expected));
    server.script.FailFirst(before + 1, code, message);
    auto r = client->Estimate(On("a10"));
    EXPECT_EQ(r.status(), absl::Status(expected, message));
    EXPECT_EQ(server.script.Attempts(), before + 1);  // Not a retryable code.
  }
}

TEST_F(ClientTest, UnavailableIsRetriedUpToThePolicysAttempts) {
  const int attempts = PolicyMaxAttempts();
  ASSERT_GE(attempts, 2);  // Else the policy has no retries to test.
  {
    FakeServer server("server-a");
    ASSERT_TRUE(server.started());
    server.script.FailFirst(attempts - 1, grpc::StatusCode::UNAVAILABLE);
    auto r = ClientOf({server.target()})->Estimate(On("a10"));
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(server.script.Attempts(), attempts);
  }
  {
    FakeServer server("server-a");
    ASSERT_TRUE(server.started());
    server.script.FailFirst(attempts, grpc::StatusCode::UNAVAILABLE, "still down");
    auto r = ClientOf({server.target()})->Estimate(On("a10"));
    EXPECT_EQ(r.status(), absl::UnavailableError("still down"));
    EXPECT_EQ(server.script.Attempts(), attempts);
  }
  {
    // max_attempts replaces the policy's: 1 turns retries off.
    FakeServer server("server-a");
    ASSERT_TRUE(server.started());
    server.script.FailFirst(1, grpc::StatusCode::UNAVAILABLE);
    auto r = ClientOf({server.target()}, /*max_attempts=*/1)->Estimate(On("a10"));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(server.script.Attempts(), 1);
  }
}

TEST_F(ClientTest, ACancelledCallIsRetriedAndThenUnavailable) {
  FakeServer server("server-a");
  ASSERT_TRUE(server.started());
  server.script.FailFirst(100, grpc::StatusCode::CANCELLED, "server shutting down");
  auto r = ClientOf({server.target()})->Estimate(On("a10"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "the server cancelled the call (shutting down?)"))
      << r.status();
  EXPECT_EQ(server.script.Attempts(), PolicyMaxAttempts());

  server.script.FailFirst(server.script.Attempts() + 1, grpc::StatusCode::CANCELLED);
  const int before = server.script.Attempts();
  auto again = ClientOf({server.target()})->Estimate(On("a10"));
  EXPECT_TRUE(again.ok()) << again.status();  // The retry got its answer.
  EXPECT_EQ(server.script.Attempts(), before + 2);
}

TEST_F(ClientTest, TheDeadlineIsSentAndASlowServerIsDeadlineExceeded) {
  FakeServer server("server-a");
  ASSERT_TRUE(server.started());
  ClientOptions options;
  options.targets = {server.target()};
  options.default_deadline = absl::Seconds(2);
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();

  // No deadline given: the options' default.
  ASSERT_TRUE((*client)->ListEstimators().ok());
  {
    absl::MutexLock lock(&server.script.mu);
    // grpc-timeout is sent rounded: the server's copy may end a little later.
    EXPECT_LE(server.script.deadline_left, absl::Seconds(2) + absl::Milliseconds(10));
    EXPECT_GT(server.script.deadline_left, absl::Milliseconds(1500));
    server.script.delay = absl::Milliseconds(500);
  }
  // The channel is connected: a deadline passing is the server's slowness.
  const absl::Time start = absl::Now();
  auto slow = (*client)->Estimate(On("a10"), absl::Milliseconds(150));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(slow.status().code(), absl::StatusCode::kDeadlineExceeded) << slow.status();
  EXPECT_GE(took, absl::Milliseconds(140));
  EXPECT_LT(took, absl::Milliseconds(450));
  absl::MutexLock lock(&server.script.mu);
  EXPECT_LE(server.script.deadline_left, absl::Milliseconds(160));
  EXPECT_GT(server.script.deadline_left, absl::Milliseconds(50));
}

TEST_F(ClientTest, NoServerBeforeTheDeadlineIsUnavailableNamingTheTarget) {
  const int port = ClosedPort();
  ASSERT_GT(port, 0);
  const std::string target = absl::StrCat("127.0.0.1:", port);
  // Waiting for a server (the policy's waitForReady) up to the deadline.
  auto client = ClientOf({target});
  ASSERT_NE(client, nullptr);
  absl::Time start = absl::Now();
  auto waited = client->Estimate(On("a10"), absl::Milliseconds(300));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(290));
  EXPECT_EQ(waited.status().code(), absl::StatusCode::kUnavailable) << waited.status();
  EXPECT_TRUE(absl::StrContains(
      waited.status().message(),
      absl::StrCat("no server was reachable at ", target, " before the deadline")))
      << waited.status();

  // max_attempts 1 drops waitForReady: it fails at once.
  auto at_once = ClientOf({target}, /*max_attempts=*/1);
  ASSERT_NE(at_once, nullptr);
  start = absl::Now();
  auto failed = at_once->Estimate(On("a10"), absl::Seconds(3));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable) << failed.status();
}

TEST_F(ClientTest, ACallOutlastingAServersStartGetsItsAnswer) {
  const int port = ClosedPort();
  ASSERT_GT(port, 0);
  auto client = ClientOf({absl::StrCat("127.0.0.1:", port)});
  ASSERT_NE(client, nullptr);
  std::unique_ptr<FakeServer> server;
  std::thread starter([&] {
    absl::SleepFor(absl::Milliseconds(200));
    server = std::make_unique<FakeServer>("late", port);
  });
  auto r = client->Estimate(On("a10"), absl::Seconds(3));
  starter.join();
  ASSERT_TRUE(server->started());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->models_version(), "late");
}

TEST_F(ClientTest, EstimateAsyncDeliversTheOutcomeAndTheClientWaitsForIt) {
  FakeServer server("server-a");
  ASSERT_TRUE(server.started());
  auto client = ClientOf({server.target()});
  ASSERT_NE(client, nullptr);
  absl::Notification done;
  absl::StatusOr<v1::EstimateResponse> outcome;
  client->EstimateAsync(On("a100-40gb"), [&](absl::StatusOr<v1::EstimateResponse> r) {
    outcome = std::move(r);
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->recommendation().estimator_id(), "a100-40gb");

  server.script.FailFirst(server.script.Attempts() + 1,
                          grpc::StatusCode::INVALID_ARGUMENT, "model.layers: empty");
  absl::Notification refused;
  client->EstimateAsync(On("a10"), [&](absl::StatusOr<v1::EstimateResponse> r) {
    outcome = std::move(r);
    refused.Notify();
  });
  ASSERT_TRUE(refused.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(outcome.status(), absl::InvalidArgumentError("model.layers: empty"));

  // Destroying the client waits for an outstanding call's callback.
  {
    absl::MutexLock lock(&server.script.mu);
    server.script.delay = absl::Milliseconds(300);
  }
  std::atomic<bool> called{false};
  client->EstimateAsync(On("a10"), [&](absl::StatusOr<v1::EstimateResponse> r) {
    EXPECT_TRUE(r.ok()) << r.status();
    called = true;
  });
  client.reset();
  EXPECT_TRUE(called);
}

TEST_F(ClientTest, AResponseOverMaxMessageBytesIsResourceExhausted) {
  FakeServer server("server-a");
  ASSERT_TRUE(server.started());
  {
    absl::MutexLock lock(&server.script.mu);
    server.script.padding = 8192;
  }
  ClientOptions options;
  options.targets = {server.target()};
  options.max_message_bytes = 4096;
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto r = (*client)->Estimate(On("a10"));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  // Within the bound it comes back.
  {
    absl::MutexLock lock(&server.script.mu);
    server.script.padding = 1024;
  }
  EXPECT_TRUE((*client)->Estimate(On("a10")).ok());
}

TEST_F(ClientTest, HealthReadsTheServersServingStatus) {
  FakeServer server("server-a");
  ASSERT_TRUE(server.started());
  auto client = ClientOf({server.target()});
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->Health().value_or(ServingState::kUnknown), ServingState::kServing);
  server.health().SetServingStatus("gpuest.v1.Estimator", true);
  EXPECT_EQ(client->Health("gpuest.v1.Estimator").value_or(ServingState::kUnknown),
            ServingState::kServing);
  server.health().SetServingStatus("gpuest.v1.Estimator", false);
  EXPECT_EQ(client->Health("gpuest.v1.Estimator").value_or(ServingState::kUnknown),
            ServingState::kNotServing);
  auto unknown = client->Health("no.such.Service");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound) << unknown.status();
}

}  // namespace
}  // namespace gpuest
