// The real gpuest-server on loopback, through the client library.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "estimators/core/features.h"
#include "estimators/horus/horus.h"
#include "gpuest/client.h"
#include "gpuest/v1/estimate.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/support/cli_fixture.h"
#include "tests/support/examples.h"
#include "tests/support/prometheus_text.h"
#include "tests/support/server_process.h"
#include "tests/support/traced_steps.h"

namespace gpuest {
namespace {

using testing::ExampleRequest;
using testing::ServerProcess;

class ServerTest : public testing::ClientAgainstServer {};

TEST_F(ServerTest, HealthIsServing) {
  auto whole = client_->Health();
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(*whole, ServingState::kServing);
  auto service = client_->Health("gpuest.v1.Estimator");
  ASSERT_TRUE(service.ok()) << service.status();
  EXPECT_EQ(*service, ServingState::kServing);
  EXPECT_EQ(client_->Health("no.such.Service").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ServerTest, EstimatesEachExampleFamily) {
  const std::map<std::string, v1::ModelFamily> examples = {
      {"mlp.json", v1::MODEL_FAMILY_MLP},
      {"cnn.json", v1::MODEL_FAMILY_CNN},
      {"transformer.json", v1::MODEL_FAMILY_TRANSFORMER}};
  for (const auto& [file, family] : examples) {
    v1::EstimateRequest request = ExampleRequest(file);
    request.set_gpu("h100-80gb");
    auto response = client_->Estimate(request);
    ASSERT_TRUE(response.ok()) << file << ": " << response.status();
    EXPECT_EQ(response->family(), family) << file;
    const v1::FeatureVector f = core::ExtractFeatures(request.model());
    const v1::EstimatorResult* horus = nullptr;
    for (const auto& r : response->results()) {
      if (r.estimator_id() == "horus") horus = &r;
    }
    ASSERT_NE(horus, nullptr) << file;
    EXPECT_EQ(
        horus->memory().point_bytes(),
        horus::HorusBytes(f.total_activations(), f.total_parameters(), f.batch_size()));
    EXPECT_GT(response->recommendation().memory_bytes(), 0u);
    EXPECT_EQ(response->recommendation().fit().gpu(), "h100-80gb");
    EXPECT_GT(response->server_latency_us(), 0);
    EXPECT_FALSE(response->models_version().empty());
  }
}

TEST_F(ServerTest, AcceptsFeatureVectors) {
  v1::EstimateRequest request;
  v1::FeatureVector* f = request.mutable_features();
  f->set_batch_size(32);
  f->set_total_parameters(25'000'000);
  f->set_total_activations(10'000'000);
  (*f->mutable_layer_counts())["conv2d"] = 53;
  auto response = client_->Estimate(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->family(), v1::MODEL_FAMILY_CNN);
  EXPECT_EQ(response->results(0).memory().point_bytes(),
            horus::HorusBytes(10'000'000, 25'000'000, 32));
}

TEST_F(ServerTest, ListsEstimators) {
  auto list = client_->ListEstimators();
  ASSERT_TRUE(list.ok()) << list.status();
  bool horus = false;
  for (const auto& e : list->estimators()) {
    if (e.id() == "horus") {
      horus = true;
      EXPECT_EQ(e.kind(), v1::ESTIMATOR_KIND_ANALYTICAL);
      EXPECT_TRUE(e.estimates_memory());
    }
  }
  EXPECT_TRUE(horus);
}

struct BadInput {
  const char* name;
  std::function<void(v1::EstimateRequest&)> mutate;
  const char* field;
};

TEST_F(ServerTest, EachKindOfBadInputIsInvalidArgumentNamingTheField) {
  const std::vector<BadInput> cases = {
      {"no input", [](auto& r) { r.clear_model(); }, "input"},
      {"batch 0", [](auto& r) { r.mutable_model()->set_batch_size(0); },
       "model.batch_size"},
      {"negative shape", [](auto& r) { r.mutable_model()->set_input_shape(0, -3); },
       "model.input_shape[0]"},
      {"negative parameters",
       [](auto& r) { r.mutable_model()->mutable_layers(1)->set_parameters(-5); },
       "model.layers[1].parameters"},
      {"negative activations",
       [](auto& r) { r.mutable_model()->mutable_layers(0)->set_output_activations(-1); },
       "model.layers[0].output_activations"},
      {"empty type", [](auto& r) { r.mutable_model()->mutable_layers(2)->set_type(""); },
       "model.layers[2].type"},
      {"too many layers",
       [](auto& r) {
         for (int i = 0; i < 10001; ++i)
           r.mutable_model()->add_layers()->set_type("ReLU");
       },
       "model.layers"},
      {"unknown family",
       [](auto& r) { r.mutable_model()->set_family(static_cast<v1::ModelFamily>(17)); },
       "model.family"},
      {"unknown optimizer",
       [](auto& r) { r.mutable_model()->set_optimizer(static_cast<v1::Optimizer>(99)); },
       "model.optimizer"},
      {"unknown dtype",
       [](auto& r) { r.mutable_model()->set_dtype(static_cast<v1::DType>(99)); },
       "model.dtype"},
      {"ragged trace",
       [](auto& r) { r.mutable_model()->mutable_trace()->add_size_bytes(1024); },
       "model.trace"},
      {"features without batch",
       [](auto& r) { r.mutable_features()->set_total_parameters(100); },
       "features.batch_size"},
      {"unknown gpu", [](auto& r) { r.set_gpu("quantum-9000"); }, "gpu"},
      {"unknown estimator", [](auto& r) { r.add_estimators("crystal-ball"); },
       "estimators[0]"},
  };
  for (const BadInput& c : cases) {
    v1::EstimateRequest request = ExampleRequest("mlp.json");
    c.mutate(request);
    auto response = client_->Estimate(request);
    ASSERT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name << ": " << response.status();
    EXPECT_TRUE(absl::StartsWith(response.status().message(), std::string(c.field) + ":"))
        << c.name << ": " << response.status().message();
  }
  // The server is unharmed.
  EXPECT_TRUE(client_->Estimate(ExampleRequest("mlp.json")).ok());
}

// A client that sends a traced description with another batch size than the trace's
// (the CLI refuses it first; a scheduler's own client may not) gets INVALID_ARGUMENT
// naming the trace, never the figure of the traced batch.
TEST_F(ServerTest, ATraceOfAnotherBatchSizeIsInvalidArgumentNamingTheTrace) {
  v1::EstimateRequest request = testing::RequestFromFile(
      std::string(GPUEST_TEST_DATA_DIR) + "/traces/encoder96_b8.json");
  ASSERT_TRUE(client_->Estimate(request).ok());
  request.mutable_model()->set_batch_size(256);
  auto response = client_->Estimate(request);
  ASSERT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument)
      << response.status();
  EXPECT_TRUE(absl::StartsWith(response.status().message(), "model.trace:"))
      << response.status().message();
  EXPECT_TRUE(absl::StrContains(response.status().message(), "describe the model again"))
      << response.status().message();
}

// The batch a trace answers for is in the trace (AllocationTrace.batch_size): a request
// for another is refused naming that field, even without an input shape to read the
// batch from. A trace of an older describer, without it, is answered with a warning
// that says its batch was read from its inputs.
TEST_F(ServerTest, ATraceSaysItsBatchAndAnOlderOneIsAnsweredWithAWarning) {
  v1::EstimateRequest request = testing::RequestFromFile(
      std::string(GPUEST_TEST_DATA_DIR) + "/traces/encoder96_b8.json");
  auto has_warning = [](const v1::EstimateResponse& response) {
    for (const v1::Warning& w : response.warnings()) {
      if (w.code() == v1::WARNING_CODE_TRACE_BATCH_UNRECORDED) return true;
    }
    return false;
  };
  auto older = client_->Estimate(request);
  ASSERT_TRUE(older.ok()) << older.status();
  EXPECT_TRUE(has_warning(*older));

  request.mutable_model()->mutable_trace()->set_batch_size(8);
  auto recorded = client_->Estimate(request);
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_FALSE(has_warning(*recorded));
  EXPECT_EQ(recorded->recommendation().memory_bytes(),
            older->recommendation().memory_bytes());

  request.mutable_model()->clear_input_shape();
  request.mutable_model()->set_batch_size(16);
  auto other = client_->Estimate(request);
  ASSERT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument) << other.status();
  EXPECT_TRUE(absl::StartsWith(other.status().message(), "model.trace.batch_size:"))
      << other.status().message();
}

TEST_F(ServerTest, ExceededDeadlineIsReportedAndHarmless) {
  // Connected first: the client reports a deadline that passes before any connection
  // as UNAVAILABLE (no server reachable), and this test is about a slow answer.
  ASSERT_TRUE(client_->Estimate(ExampleRequest("cnn.json")).ok());
  // A call that takes tens of milliseconds: gRPC keeps deadlines to the millisecond,
  // and the example alone can be answered within the millisecond a 1 us deadline is
  // rounded up to.
  auto response =
      client_->Estimate(testing::LongTracedStep(20'000), absl::Microseconds(1));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded)
      << response.status();
  EXPECT_TRUE(client_->Estimate(ExampleRequest("cnn.json")).ok());
}

TEST_F(ServerTest, ReflectionListsTheServicesAsGrpcurlSeesThem) {
  auto channel =
      grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  auto stub = grpc::reflection::v1alpha::ServerReflection::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto stream = stub->ServerReflectionInfo(&context);
  grpc::reflection::v1alpha::ServerReflectionRequest request;
  request.set_list_services("");
  ASSERT_TRUE(stream->Write(request));
  grpc::reflection::v1alpha::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> services;
  for (const auto& s : response.list_services_response().service())
    services.push_back(s.name());
  EXPECT_NE(std::find(services.begin(), services.end(), "gpuest.v1.Estimator"),
            services.end());
  EXPECT_NE(std::find(services.begin(), services.end(), "grpc.health.v1.Health"),
            services.end());

  request.set_file_containing_symbol("gpuest.v1.EstimateRequest");
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_GT(response.file_descriptor_response().file_descriptor_proto_size(), 0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

// Limits count decoded bytes: a compressed message, which would inflate past them
// before any check, is refused on every gRPC port, and the server goes on.
TEST_F(ServerTest, ACompressedMessageIsRefusedBeforeItIsInflated) {
  auto channel =
      grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Estimator::NewStub(channel);
  for (const grpc_compression_algorithm algorithm :
       {GRPC_COMPRESS_GZIP, GRPC_COMPRESS_DEFLATE}) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    context.set_compression_algorithm(algorithm);
    v1::EstimateResponse response;
    const grpc::Status status =
        stub->Estimate(&context, ExampleRequest("cnn.json"), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
        << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), "is disabled"))
        << status.error_message();
  }
  EXPECT_TRUE(client_->Estimate(ExampleRequest("cnn.json")).ok());
}

ClientOptions WithTargets(std::vector<std::string> targets) {
  ClientOptions options;
  options.targets = std::move(targets);
  return options;
}

TEST(RoundRobin, SpreadsCallsOverEveryTargetAndSkipsDeadOnes) {
  auto a = ServerProcess::Start();
  auto b = ServerProcess::Start();
  ASSERT_TRUE(a.ok() && b.ok());
  ClientOptions options = WithTargets({(*a)->target(), (*b)->target()});
  options.default_deadline = absl::Seconds(5);
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const v1::EstimateRequest request = ExampleRequest("mlp.json");
  auto served_by = [](const ServerProcess& server) -> double {
    auto text = testing::HttpGet(server.metrics_port(), "/metrics");
    EXPECT_TRUE(text.ok()) << text.status();
    auto samples = testing::ParsePrometheusText(text.ok() ? *text : "");
    EXPECT_TRUE(samples.ok()) << samples.status();
    return samples.ok() ? testing::SumSamples(*samples, "gpuest_requests_total",
                                              {{"method", "Estimate"}})
                              .value_or(0)
                        : 0;
  };
  // round_robin uses a target once its connection is READY, each at its own pace:
  // call in rounds until both have answered a share, with a bound on the calls.
  int calls = 0;
  double served_a = 0, served_b = 0;
  while ((served_a < 5 || served_b < 5) && calls < 2000) {
    for (int i = 0; i < 20; ++i, ++calls) {
      ASSERT_TRUE((*client)->Estimate(request).ok());
    }
    served_a = served_by(**a);
    served_b = served_by(**b);
  }
  EXPECT_GE(served_a, 5) << "both targets should get a share of the calls";
  EXPECT_GE(served_b, 5) << "both targets should get a share of the calls";
  EXPECT_EQ(served_a + served_b, calls);

  (*b)->Signal(SIGKILL);
  ASSERT_TRUE((*b)->WaitForExit(absl::Seconds(10)).ok());
  int ok = 0;
  for (int i = 0; i < 20; ++i) ok += (*client)->Estimate(request).ok();
  EXPECT_GE(ok, 19) << "round_robin should route around the dead target";
  EXPECT_EQ(served_by(**a), served_a + ok);
}

TEST(ClientOptions, RejectsUnusableTargets) {
  EXPECT_EQ(Client::Create(WithTargets({})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Client::Create(WithTargets({"a.example:1", "b.example:2"})).status().code(),
            absl::StatusCode::kInvalidArgument);
  ClientOptions no_deadline = WithTargets({"127.0.0.1:1"});
  no_deadline.default_deadline = absl::ZeroDuration();
  EXPECT_EQ(Client::Create(no_deadline).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto ok = Client::Create(WithTargets({"127.0.0.1:1", "127.0.0.1:2"}));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)->channel_target(), "ipv4:127.0.0.1:1,127.0.0.1:2");
}

// gRPC's default SO_REUSEPORT let a second server start on a port in use and take half
// its connections; it must fail to bind instead.
TEST(Listening, ASecondServerOnTheSamePortFailsToStart) {
  auto first = ServerProcess::Start();
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = ServerProcess::Start({"--listen", (*first)->target()});
  ASSERT_FALSE(second.ok()) << "a second server started on " << (*first)->target();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "cannot listen"))
      << second.status();
  // The first one is unharmed. (A deadline for a first call on a loaded machine, not
  // the 5 ms default the latency objective sets.)
  ClientOptions options = WithTargets({(*first)->target()});
  options.default_deadline = absl::Seconds(10);
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok());
  const auto answer = (*client)->Estimate(ExampleRequest("mlp.json"));
  EXPECT_TRUE(answer.ok()) << answer.status();
}

// A loopback port nothing listens on (the kernel's pick, released), for a server that
// is not there yet.
int UnusedLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool ok = fd >= 0 &&
                  bind(fd, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  if (fd >= 0) close(fd);
  return ok ? ntohs(address.sin_port) : 0;
}

// The default deadline and retry policy (proto/gpuest/v1/client_policy.json, the
// Python client's too: python/tests/test_client.py checks the same two things). A call
// to a server that never comes waits for it until the deadline, not less, and then
// says that no server was reachable and where it looked.
TEST(ClientPolicy, ACallToAServerThatNeverComesFailsAtTheDefaultDeadline) {
  const int port = UnusedLoopbackPort();
  ASSERT_NE(port, 0);
  const std::string target = "127.0.0.1:" + std::to_string(port);
  auto client = Client::Create(WithTargets({target}));
  ASSERT_TRUE(client.ok());
  const absl::Duration deadline = ClientOptions().default_deadline;
  const absl::Time start = absl::Now();
  const auto response = (*client)->Estimate(ExampleRequest("mlp.json"));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable)
      << response.status();
  EXPECT_TRUE(absl::StrContains(
      response.status().message(),
      absl::StrCat("no server was reachable at ", target, " before the deadline")))
      << response.status();
  EXPECT_GE(took, deadline - absl::Milliseconds(5)) << "gave up before the deadline";
  EXPECT_LT(took, deadline + absl::Seconds(2)) << "outlived the deadline";
}

// ... and a call made while the server is down, which starts half a second later, gets
// its answer within the default deadline.
TEST(ClientPolicy, ACallOutlastsAServerThatStartsHalfASecondLater) {
  const int port = UnusedLoopbackPort();
  ASSERT_NE(port, 0);
  const std::string target = "127.0.0.1:" + std::to_string(port);
  auto client = Client::Create(WithTargets({target}));
  ASSERT_TRUE(client.ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<v1::EstimateResponse> response = absl::UnknownError("not called");
  absl::Duration took;
  std::thread caller([&] {
    response = (*client)->Estimate(ExampleRequest("mlp.json"));
    took = absl::Now() - start;
  });
  absl::SleepFor(absl::Milliseconds(500));
  auto server = ServerProcess::Start({"--listen=" + target});
  caller.join();
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(response.ok()) << response.status() << " after " << took;
  EXPECT_LT(took, ClientOptions().default_deadline);
}

// max_attempts 1: no retries and no waiting, so a call fails at once.
TEST(ClientPolicy, OneAttemptFailsAtOnceWhileNoServerIsReachable) {
  ClientOptions options = WithTargets({"127.0.0.1:1"});
  options.max_attempts = 1;
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok());
  const absl::Time start = absl::Now();
  EXPECT_EQ((*client)->Estimate(ExampleRequest("mlp.json")).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_LT(absl::Now() - start, options.default_deadline / 2);
}

}  // namespace
}  // namespace gpuest
