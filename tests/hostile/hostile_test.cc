// docs/THREATS.md's table, row by row, against one real gpuest-server on
// loopback (gRPC and the extender's HTTP): each hostile input is refused or answered
// as docs/THREATS.md says, within its deadline, and after each the server is still
// SERVING and its resident memory under the deployment's 2 GiB limit.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gpuest/client.h"
#include "gpuest/v1/estimate.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/support/cli_fixture.h"
#include "tests/support/examples.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using nlohmann::json;

// The pod limit deploy/kubernetes ships.
constexpr int64_t kDeploymentLimitBytes = int64_t{2} << 30;

class HostileTest : public testing::ClientAgainstServer {
 protected:
  static void SetUpTestSuite() {
    StartServerAndClient({"--extender-listen=127.0.0.1:0"}, absl::Seconds(30));
  }

  // After every row: serving, within the memory limit.
  void TearDown() override {
    auto health = client_->Health("", absl::Seconds(5));
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, ServingState::kServing);
    EXPECT_LT(ResidentBytes(), kDeploymentLimitBytes);
  }

  static int64_t ResidentBytes() {
    std::ifstream status("/proc/" + std::to_string(server_->pid()) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (absl::StartsWith(line, "VmRSS:")) {
        int64_t kib = 0;
        std::istringstream(line.substr(6)) >> kib;
        return kib * 1024;
      }
    }
    return 0;
  }

  static httplib::Client Http() {
    httplib::Client http("127.0.0.1", server_->extender_port());
    http.set_read_timeout(30, 0);
    http.set_write_timeout(30, 0);
    return http;
  }

  // A filter of one pod (a described job on one GPU) over one node whose
  // gpuest.io/gpus annotation is `annotation`.
  static json FilterWithAnnotation(const std::string& annotation) {
    json node;
    node["metadata"]["name"] = "n1";
    node["metadata"]["labels"]["gpuest.io/gpu-model"] = "a100-40gb";
    node["metadata"]["annotations"]["gpuest.io/gpus"] = annotation;
    json container;
    container["name"] = "t";
    container["resources"]["limits"]["nvidia.com/gpu"] = "1";
    json pod;
    pod["metadata"]["name"] = "p";
    pod["metadata"]["namespace"] = "ml";
    pod["metadata"]["annotations"]["gpuest.io/description"] =
        testing::ReadFileOrDie(std::string(GPUEST_EXAMPLES_DIR) + "/cnn.json");
    pod["spec"]["containers"] = json::array({container});
    json args;
    args["Pod"] = pod;
    args["Nodes"]["kind"] = "NodeList";
    args["Nodes"]["items"] = json::array({node});
    return args;
  }
};

// Row 1: 100,000-deep nesting inside the annotation killed the server (SIGSEGV).
TEST_F(HostileTest, ADeepAnnotationIsRefusedForItsNodeAndNothingDies) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const absl::Time start = absl::Now();
  auto r = Http().Post("/filter", FilterWithAnnotation(deep).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(absl::StrContains(r->body, "levels deep"))
      << r->body.substr(r->body.size() > 600 ? r->body.size() - 600 : 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// Row 2: input_activations of -1 or 2^63-1 answered a 58.5 GiB job as fitting.
TEST_F(HostileTest, AnInputActivationsOutOfBoundsIsInvalidArgumentNamingIt) {
  for (const int64_t value : {int64_t{-1}, INT64_MAX}) {
    v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
    request.mutable_model()->mutable_layers(3)->set_input_activations(value);
    auto response = client_->Estimate(request);
    EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << value;
    EXPECT_TRUE(absl::StrContains(response.status().message(),
                                  "model.layers[3].input_activations"))
        << response.status();
  }
}

// Row 3: 256 jobs with 60 KB names took 4.47 GB and 45 s past the deadline.
TEST_F(HostileTest, LongJobNamesAreRefusedAtOnce) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("a100-40gb");
  for (int i = 0; i < 256; ++i) {
    *request.add_existing() =
        testing::MeasuredJob(absl::StrCat(i, std::string(60000, 'n')), 1 << 30, 10);
  }
  *request.mutable_candidate() = testing::MeasuredJob("new", 1 << 30, 10);
  const absl::Time start = absl::Now();
  auto response = client_->CheckPlacement(request);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(response.status().message(), "existing[0].name"))
      << response.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// Row 4: a 1 MB gzip body inflated to 1 GiB; gRPC's compressed messages likewise.
TEST_F(HostileTest, EncodedBodiesAreRefusedBeforeTheyInflate) {
  // The extender's refusal of an encoded body is ExtenderTest.HostileBodies...: with a
  // body larger than the socket's buffers the sender is not disconnected yet (open,
  // docs/THREATS.md).
  auto channel =
      grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Estimator::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  v1::EstimateResponse response;
  EXPECT_EQ(stub->Estimate(&context, testing::ExampleRequest("cnn.json"), &response)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

// Row 5: 8 x 120 MB POSTs to a path that does not exist were buffered (+1 GB), none
// counted or shed, then answered 404. Now each is refused from its headers and its body
// never read: the server's memory does not grow with them.
TEST_F(HostileTest, LargeBodiesToAPathThatDoesNotExistAreNeverBuffered) {
  const int64_t before = ResidentBytes();
  std::vector<std::thread> senders;
  std::atomic<int> answered_404{0};
  const std::string body(size_t{120} << 20, 'x');  // One copy, sent by all 8.
  for (int i = 0; i < 8; ++i) {
    senders.emplace_back([&] {
      httplib::Client http("127.0.0.1", server_->extender_port());
      http.set_write_timeout(10, 0);
      // cpp-httplib takes the body by reference: the 8 senders share the one copy.
      auto r = http.Post("/nowhere", body, "application/json");
      // The client sees the 404, or a reset while it still sends: either way unread.
      if (r && r->status == 404) ++answered_404;
    });
  }
  for (std::thread& t : senders) t.join();
  EXPECT_LT(ResidentBytes() - before, int64_t{64} << 20)
      << "the server's memory grew with bodies it refused";
  auto r = Http().Post("/nowhere", "{}", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_TRUE(absl::StrContains(r->body, "no such path")) << r->body;
}

// Row 7: an annotation listing 400,000 GPUs gave a 207 MB reply.
TEST_F(HostileTest, AnAnnotationOfTooManyGpusIsRefusedShort) {
  std::string many = "[";
  for (int i = 0; i < 400000; ++i) many += R"({"freeMiB":1},)";
  many.back() = ']';
  auto r = Http().Post("/filter", FilterWithAnnotation(many).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_LT(r->body.size(), size_t{64} << 10);
  EXPECT_TRUE(absl::StrContains(r->body, "over the limit")) << r->body.substr(0, 400);
}

// Row 9: text/plain, XML and no type were accepted.
TEST_F(HostileTest, OnlyJsonIsAccepted) {
  const std::string body = FilterWithAnnotation("[]").dump();
  for (const char* type : {"text/plain", "application/xml", ""}) {
    auto r = Http().Post("/filter", body, type);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 415) << type;
  }
}

// Row 6: connections that each sent one header line every 0.2 s held cpp-httplib's
// threads (one per connection, timeouts per read): /healthz did not answer in 5 of 12
// runs. Now they cost sockets, not threads: with 300 of them trickling, every /healthz
// and every gRPC Health answers (bench/slow_senders.py measures how fast: the goal is
// 100 ms), and a request whose headers have not ended by HttpFront::kHeaderTime has
// its connection closed whatever it sends (issue 45: headers have a deadline of their
// own, apart from the route's timeout).
TEST_F(HostileTest, SlowSendersNeitherStarveHealthNorKeepTheirConnections) {
  std::vector<int> senders;
  for (int i = 0; i < 300; ++i) {
    // From three addresses, each under the front's per-peer limit (HttpFront::
    // kMaxConnectionsPerPeer): the crowd's connections are all held, and timed.
    const int fd = testing::OpenConnection(server_->extender_port(),
                                           "POST /filter HTTP/1.1\r\nHost: x\r\n",
                                           absl::StrCat("127.0.0.", 10 + i % 3));
    ASSERT_GE(fd, 0);
    senders.push_back(fd);
  }
  const absl::Time began = absl::Now();
  std::atomic<bool> stop{false};
  std::atomic<int> open{static_cast<int>(senders.size())};
  std::thread trickle([&] {
    std::vector<bool> closed(senders.size(), false);
    for (int line = 0; !stop; ++line) {
      const std::string header = absl::StrCat("X-Slow-", line, ": y\r\n");
      for (size_t i = 0; i < senders.size(); ++i) {
        if (closed[i]) continue;
        if (send(senders[i], header.data(), header.size(), MSG_NOSIGNAL) < 0) {
          closed[i] = true;
          --open;
        }
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  });
  absl::Duration slowest_healthz, slowest_health;
  for (int probe = 0; probe < 20; ++probe) {
    httplib::Client http("127.0.0.1", server_->extender_port());
    http.set_connection_timeout(2, 0);
    http.set_read_timeout(2, 0);
    absl::Time start = absl::Now();
    auto r = http.Get("/healthz");
    slowest_healthz = std::max(slowest_healthz, absl::Now() - start);
    ASSERT_TRUE(r) << "probe " << probe << ": /healthz did not answer";
    EXPECT_EQ(r->status, 200);
    start = absl::Now();
    auto health = client_->Health("", absl::Seconds(2));
    slowest_health = std::max(slowest_health, absl::Now() - start);
    ASSERT_TRUE(health.ok()) << health.status();
    absl::SleepFor(absl::Milliseconds(50));
  }
  // Generous beside the 100 ms goal: ctest runs this beside the other suites.
  EXPECT_LT(slowest_healthz, absl::Seconds(1));
  EXPECT_LT(slowest_health, absl::Seconds(1));
  // The headers' deadline (3 s) and the reaper's 100 ms: past that, every trickling
  // connection is closed.
  const bool all_closed = testing::WaitFor([&] { return open.load() == 0; },
                                           absl::Seconds(15), absl::Milliseconds(100));
  const absl::Duration held = absl::Now() - began;
  stop = true;
  trickle.join();
  for (int fd : senders) close(fd);
  EXPECT_TRUE(all_closed) << open.load() << " slow senders still connected after "
                          << held;
  // Their headers never end: closed by the headers' own deadline (HttpFront::
  // kHeaderTime), long before the route's.
  EXPECT_GT(held, absl::Seconds(2)) << "closed before their time";
}

}  // namespace
}  // namespace gpuest
