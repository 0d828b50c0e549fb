// server/service: the Estimator and Placement services and their CallDispatcher in the
// test process, on a real gRPC server on loopback with the shipped models, called
// through the generated stubs: answers equal to what the engines answer directly, and
// each of the dispatcher's refusals (queue full, bytes in flight, a deadline the queue
// would outlast, a deadline passed in the queue, a response over the message size, an
// undecodable request) with its status and its count in the metrics; and RunBlocking,
// the HTTP entry points' way in, called directly.
#include "server/service.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/intake.h"
#include "server/metrics.h"
#include "server/worker_pool.h"
#include "tests/support/examples.h"
#include "tests/support/prometheus_text.h"
#include "tests/support/server_process.h"
#include "tests/support/shipped_models.h"

namespace gpuest::server {
namespace {

using google::protobuf::util::MessageDifferencer;

// The dispatcher's bounds for one test.
struct Bounds {
  int threads = 2;
  size_t max_queue = 8;
  int64_t max_bytes_in_flight = 1 << 20;
  int64_t max_response_bytes = 16 << 20;
  int64_t inline_max_request_bytes = 0;  // Every call goes to a worker.
  int blocking_share = 1;
};

// The services as gpuest-server wires them (server/server.cc), on 127.0.0.1:0.
class InProcessServer {
 public:
  explicit InProcessServer(const Bounds& bounds = {})
      : models_(testing::ShippedModelSet()),
        metrics_(Metrics::Create()),
        pool_(bounds.threads, bounds.max_queue),
        intake_(bounds.max_bytes_in_flight, bounds.threads),
        dispatcher_(*metrics_, pool_, intake_, bounds.max_response_bytes,
                    bounds.inline_max_request_bytes, bounds.blocking_share),
        estimator_(models_, dispatcher_),
        placement_(models_, dispatcher_) {
    std::vector<ServedEstimator> served;
    for (const auto& e : models_.Current()->registry().estimators()) {
      served.push_back({e->Info().id(), e->Device()});
    }
    metrics_->SetModels(models_.Current()->version(), served);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&estimator_);
    builder.RegisterService(&placement_);
    server_ = builder.BuildAndStart();
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
  }
  ~InProcessServer() {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    pool_.Stop();
  }

  bool started() const { return server_ != nullptr && port_ > 0; }
  std::unique_ptr<v1::Estimator::Stub> Estimator() {
    return v1::Estimator::NewStub(channel_);
  }
  std::unique_ptr<v1::Placement::Stub> Placement() {
    return v1::Placement::NewStub(channel_);
  }
  const std::shared_ptr<grpc::Channel>& channel() { return channel_; }
  const placement::ModelSet& models() { return *models_.Current(); }
  WorkerPool& pool() { return pool_; }
  Intake& intake() { return intake_; }
  CallDispatcher& dispatcher() { return dispatcher_; }

  // The sum of the samples of name with labels, in the metrics' text now.
  std::optional<double> Sample(const std::string& name,
                               const std::map<std::string, std::string>& labels) {
    auto samples = testing::ParsePrometheusText(metrics_->Text());
    EXPECT_TRUE(samples.ok()) << samples.status();
    if (!samples.ok()) return std::nullopt;
    return testing::SumSamples(*samples, name, labels);
  }
  std::optional<double> Shed(const std::string& method, const std::string& reason) {
    return Sample("gpuest_requests_shed_total", {{"method", method}, {"reason", reason}});
  }
  std::optional<double> Answered(const std::string& method, const std::string& code) {
    return Sample("gpuest_requests_total", {{"method", method}, {"code", code}});
  }

 private:
  testing::FixedModels models_;
  std::unique_ptr<Metrics> metrics_;
  WorkerPool pool_;
  Intake intake_;
  CallDispatcher dispatcher_;
  EstimatorService estimator_;
  PlacementService placement_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Holds the pool's threads (and, with queued, places of its queue) until released.
class Blocker {
 public:
  // running: tasks that take a thread each; queued: tasks behind them.
  Blocker(WorkerPool& pool, int running, int queued = 0) {
    auto hold = [this] {
      absl::MutexLock lock(&mu_);
      ++entered_;
      mu_.Await(absl::Condition(&released_));
    };
    for (int i = 0; i < running; ++i) EXPECT_TRUE(pool.Submit(hold));
    {
      // The running ones taken by the threads first, so that the queue holds only the
      // queued ones.
      absl::MutexLock lock(&mu_);
      auto all_running = [this, running]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return entered_ >= running;
      };
      mu_.Await(absl::Condition(&all_running));
    }
    for (int i = 0; i < queued; ++i) EXPECT_TRUE(pool.Submit(hold));
  }
  ~Blocker() { Release(); }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }

 private:
  absl::Mutex mu_;
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

void SetDeadline(grpc::ClientContext& context, absl::Duration in) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + in));
}

v1::EstimateRequest CnnOn(const std::string& gpu) {
  v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
  request.set_gpu(gpu);
  return request;
}

class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { testing::ShippedModelSet(); }  // Loaded once, here.
};

TEST_F(ServiceTest, ListEstimatorsAnswersTheSetsEngine) {
  InProcessServer server;
  ASSERT_TRUE(server.started());
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(5));
  v1::ListEstimatorsResponse response;
  const grpc::Status status = server.Estimator()->ListEstimators(
      &context, v1::ListEstimatorsRequest(), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const v1::ListEstimatorsResponse direct = server.models().engine().ListEstimators();
  EXPECT_TRUE(MessageDifferencer::Equals(response, direct))
      << response.ShortDebugString() << "\nvs\n"
      << direct.ShortDebugString();
  EXPECT_GT(response.estimators_size(), 0);
  EXPECT_EQ(server.Answered("ListEstimators", "OK"), 1);
  EXPECT_EQ(server.Sample("gpuest_requests_in_flight", {{"method", "ListEstimators"}}),
            0);
}

TEST_F(ServiceTest, EstimateAnswersWhatTheEngineAnswersAndTimesEachEstimator) {
  InProcessServer server;
  ASSERT_TRUE(server.started());
  const v1::EstimateRequest request = CnnOn("a100-80gb");
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(10));
  v1::EstimateResponse response;
  const grpc::Status status = server.Estimator()->Estimate(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();

  auto direct = server.models().engine().Estimate(request, common::WorkDeadline::Never());
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_TRUE(
      MessageDifferencer::Equals(response.recommendation(), direct->recommendation()))
      << response.recommendation().ShortDebugString() << "\nvs\n"
      << direct->recommendation().ShortDebugString();
  EXPECT_EQ(response.models_version(), server.models().version());
  ASSERT_EQ(response.results_size(), direct->results_size());
  for (int i = 0; i < response.results_size(); ++i) {
    const std::string& id = response.results(i).estimator_id();
    EXPECT_EQ(id, direct->results(i).estimator_id());
    // Each result's latency observed under its estimator.
    EXPECT_EQ(
        server.Sample("gpuest_estimator_duration_seconds_count", {{"estimator", id}}), 1)
        << id;
  }
  EXPECT_GT(response.server_latency_us(), 0);
  EXPECT_EQ(server.Answered("Estimate", "OK"), 1);
  // Nothing is left held once the call is over.
  EXPECT_EQ(server.Sample("gpuest_request_bytes_in_flight", {}), 0);
  EXPECT_EQ(server.Sample("gpuest_requests_queued", {}), 0);
}

TEST_F(ServiceTest, TheEnginesRefusalIsTheCallsStatusAndCounted) {
  InProcessServer server;
  ASSERT_TRUE(server.started());
  const v1::EstimateRequest request = CnnOn("no-such-gpu");
  auto direct = server.models().engine().Estimate(request, common::WorkDeadline::Never());
  ASSERT_FALSE(direct.ok());

  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(10));
  v1::EstimateResponse response;
  const grpc::Status status = server.Estimator()->Estimate(&context, request, &response);
  EXPECT_EQ(static_cast<int>(status.error_code()),
            static_cast<int>(direct.status().code()));
  EXPECT_TRUE(absl::StrContains(status.error_message(), direct.status().message()))
      << status.error_message() << "\nvs\n"
      << direct.status();
  EXPECT_EQ(server.Answered("Estimate", absl::StatusCodeToString(direct.status().code())),
            1);
}

TEST_F(ServiceTest, AnUndecodableRequestIsInvalidArgumentNamingItsType) {
  InProcessServer server;
  ASSERT_TRUE(server.started());
  grpc::GenericStub generic(server.channel());
  // Field 1 with wire type 7, which no protobuf message has.
  const std::string bytes = "\x0f\x01\x02";
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(5));
  absl::Notification done;
  grpc::Status status;
  generic.UnaryCall(&context, "/gpuest.v1.Estimator/Estimate", grpc::StubOptions(),
                    &request, &response, [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(status.error_message(),
                                "the request is not a valid gpuest.v1.EstimateRequest"))
      << status.error_message();
  EXPECT_EQ(server.Answered("Estimate", "INVALID_ARGUMENT"), 1);
}

TEST_F(ServiceTest, ACallTheQueueHasNoRoomForIsRefusedAtOnceAndCounted) {
  Bounds bounds;
  bounds.threads = 1;
  bounds.max_queue = 1;
  InProcessServer server(bounds);
  ASSERT_TRUE(server.started());
  Blocker blocker(server.pool(), /*running=*/1, /*queued=*/1);

  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(5));
  v1::ListEstimatorsResponse response;
  const absl::Time sent = absl::Now();
  const grpc::Status status = server.Estimator()->ListEstimators(
      &context, v1::ListEstimatorsRequest(), &response);
  EXPECT_LT(absl::Now() - sent, absl::Seconds(1));  // Refused, not left to wait.
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "its queue holds 1 calls"))
      << status.error_message();
  EXPECT_EQ(server.Shed("ListEstimators", "queue_full"), 1);
  EXPECT_EQ(server.Answered("ListEstimators", "RESOURCE_EXHAUSTED"), 1);
  EXPECT_EQ(server.Sample("gpuest_requests_queued", {}), 0);
  EXPECT_EQ(server.Sample("gpuest_request_bytes_in_flight", {}), 0);
}

TEST_F(ServiceTest, RequestBytesOverTheInFlightBoundAreRefusedUntilReleased) {
  Bounds bounds;
  bounds.max_bytes_in_flight = 1;
  InProcessServer server(bounds);
  ASSERT_TRUE(server.started());
  auto estimate = [&] {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(10));
    v1::EstimateResponse response;
    return server.Estimator()->Estimate(&context, CnnOn("a100-80gb"), &response);
  };
  {
    // An entry point holds the whole bound (an empty server takes any size).
    auto held = server.dispatcher().HoldRequestBytes(RpcMethod::kExtenderFilter, 1);
    ASSERT_TRUE(held.ok()) << held.status();
    EXPECT_EQ(server.Sample("gpuest_request_bytes_in_flight", {}), 1);

    const grpc::Status refused = estimate();
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_TRUE(absl::StrContains(refused.error_message(), "would exceed its bound of 1"))
        << refused.error_message();
    EXPECT_EQ(server.Shed("Estimate", "bytes_in_flight"), 1);
    EXPECT_EQ(server.Answered("Estimate", "RESOURCE_EXHAUSTED"), 1);

    // A second hold is refused the same way, and counted as a finished call.
    auto more = server.dispatcher().HoldRequestBytes(RpcMethod::kExtenderFilter, 5);
    EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(server.Shed("extender/filter", "bytes_in_flight"), 1);
    EXPECT_EQ(server.Answered("extender/filter", "RESOURCE_EXHAUSTED"), 1);
    EXPECT_EQ(server.Sample("gpuest_request_bytes_in_flight", {}), 1);
  }
  EXPECT_EQ(server.Sample("gpuest_request_bytes_in_flight", {}), 0);
  const grpc::Status taken = estimate();
  EXPECT_TRUE(taken.ok()) << taken.error_message();
}

TEST_F(ServiceTest, ACallTheQueueAheadWouldMakeLateIsRefusedAtOnce) {
  Bounds bounds;
  bounds.threads = 1;
  InProcessServer server(bounds);
  ASSERT_TRUE(server.started());
  server.intake().RecordServiceTime(absl::Seconds(10));  // Calls take 10 s lately.
  Blocker blocker(server.pool(), /*running=*/1, /*queued=*/1);

  grpc::ClientContext context;
  SetDeadline(context, absl::Milliseconds(500));
  v1::ListEstimatorsResponse response;
  const grpc::Status status = server.Estimator()->ListEstimators(
      &context, v1::ListEstimatorsRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << status.error_message();
  EXPECT_TRUE(absl::StrContains(status.error_message(), "1 calls queued ahead"))
      << status.error_message();
  EXPECT_EQ(server.Shed("ListEstimators", "deadline_unmeetable"), 1);
  EXPECT_EQ(server.Sample("gpuest_requests_queued", {}), 0);
}

TEST_F(ServiceTest, ACallWhoseDeadlinePassesInTheQueueIsNeverWorkedOn) {
  Bounds bounds;
  bounds.threads = 1;
  InProcessServer server(bounds);
  ASSERT_TRUE(server.started());
  Blocker blocker(server.pool(), /*running=*/1);

  grpc::ClientContext context;
  SetDeadline(context, absl::Milliseconds(150));
  v1::EstimateResponse response;
  const grpc::Status status =
      server.Estimator()->Estimate(&context, CnnOn("a100-80gb"), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(server.Sample("gpuest_requests_queued", {}), 1);  // Still waiting.

  blocker.Release();
  EXPECT_TRUE(
      testing::WaitFor([&] { return server.Shed("Estimate", "deadline_in_queue") == 1; },
                       absl::Seconds(2)));
  EXPECT_TRUE(testing::WaitFor(
      [&] { return server.Answered("Estimate", "DEADLINE_EXCEEDED") == 1; },
      absl::Seconds(2)));
  EXPECT_EQ(server.Sample("gpuest_requests_queued", {}), 0);
  // No estimator ran for it.
  EXPECT_EQ(server.Sample("gpuest_estimator_duration_seconds_count", {}), 0);
}

TEST_F(ServiceTest, ShortRequestsRunOnTheGrpcThreadWhileThePoolHasRoom) {
  for (const int64_t inline_max : {int64_t{0}, int64_t{1} << 20}) {
    SCOPED_TRACE(absl::StrCat("inline_max_request_bytes ", inline_max));
    Bounds bounds;
    bounds.inline_max_request_bytes = inline_max;
    InProcessServer server(bounds);
    ASSERT_TRUE(server.started());
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(5));
    v1::ListEstimatorsResponse response;
    ASSERT_TRUE(server.Estimator()
                    ->ListEstimators(&context, v1::ListEstimatorsRequest(), &response)
                    .ok());
    EXPECT_EQ(server.Sample("gpuest_requests_run_on_grpc_thread_total",
                            {{"method", "ListEstimators"}}),
              inline_max > 0 ? 1 : 0);
  }
}

TEST_F(ServiceTest, AResponseOverTheMaxMessageSizeIsResourceExhausted) {
  Bounds bounds;
  bounds.max_response_bytes = 16;
  InProcessServer server(bounds);
  ASSERT_TRUE(server.started());
  const size_t size = server.models().engine().ListEstimators().ByteSizeLong();
  ASSERT_GT(size, 16u);
  grpc::ClientContext context;
  SetDeadline(context, absl::Seconds(5));
  v1::ListEstimatorsResponse response;
  const grpc::Status status = server.Estimator()->ListEstimators(
      &context, v1::ListEstimatorsRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(
      status.error_message(),
      absl::StrCat("the response (", size,
                   " bytes) is larger than the server's max message size (16 bytes)")))
      << status.error_message();
  EXPECT_EQ(server.Answered("ListEstimators", "RESOURCE_EXHAUSTED"), 1);
}

TEST_F(ServiceTest, PlacementAnswersWhatThePlacementEngineAnswers) {
  InProcessServer server;
  ASSERT_TRUE(server.started());
  v1::CheckPlacementRequest check;
  check.mutable_gpu()->set_catalog_id("a100-40gb");
  *check.add_existing() = testing::MeasuredJob("busy", uint64_t{12} << 30, 60);
  check.mutable_candidate()->set_name("new");
  *check.mutable_candidate()->mutable_description() = CnnOn("");
  {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(10));
    v1::CheckPlacementResponse response;
    const grpc::Status status =
        server.Placement()->CheckPlacement(&context, check, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    auto direct = server.models().placement().CheckPlacement(check);
    ASSERT_TRUE(direct.ok()) << direct.status();
    response.clear_server_latency_us();
    direct->clear_server_latency_us();
    EXPECT_TRUE(MessageDifferencer::Equals(response, *direct))
        << response.ShortDebugString() << "\nvs\n"
        << direct->ShortDebugString();
  }
  v1::RankGpusRequest rank;
  *rank.mutable_job() = check.candidate();
  {
    grpc::ClientContext context;
    SetDeadline(context, absl::Seconds(10));
    v1::RankGpusResponse response;
    const grpc::Status status = server.Placement()->RankGpus(&context, rank, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    auto direct = server.models().placement().RankGpus(rank);
    ASSERT_TRUE(direct.ok()) << direct.status();
    response.clear_server_latency_us();
    direct->clear_server_latency_us();
    EXPECT_TRUE(MessageDifferencer::Equals(response, *direct));
    EXPECT_GT(response.gpus_size(), 1);
  }
  EXPECT_EQ(server.Answered("CheckPlacement", "OK"), 1);
  EXPECT_EQ(server.Answered("RankGpus", "OK"), 1);
}

// RunBlocking: the entry points that answer on threads of their own (the extender's and
// the webhook's HTTP) come in here, without gRPC.
TEST_F(ServiceTest, RunBlockingRunsTheWorkWithItsDeadlineAndCountsItsOutcome) {
  InProcessServer server;
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  absl::Time seen_deadline;
  const absl::Status status = server.dispatcher().RunBlocking(
      RpcMethod::kAdmissionMutate, deadline, [&](const common::WorkDeadline& d) {
        seen_deadline = d.deadline();
        return absl::InvalidArgumentError("the pod's description is wrong");
      });
  EXPECT_EQ(status, absl::InvalidArgumentError("the pod's description is wrong"));
  EXPECT_EQ(seen_deadline, deadline);
  EXPECT_EQ(server.Answered("admission/mutate", "INVALID_ARGUMENT"), 1);

  // A deadline already passed: refused before the work starts.
  bool ran = false;
  const absl::Status late = server.dispatcher().RunBlocking(
      RpcMethod::kAdmissionMutate, absl::Now() - absl::Milliseconds(1),
      [&](const common::WorkDeadline&) {
        ran = true;
        return absl::OkStatus();
      });
  EXPECT_FALSE(ran);
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_TRUE(absl::StrContains(late.message(), "before its work started")) << late;
  EXPECT_EQ(server.Shed("admission/mutate", "deadline_in_queue"), 1);
}

TEST_F(ServiceTest, RunBlockingWaitsForAPlaceInItsShareNoLongerThanItsDeadline) {
  Bounds bounds;
  bounds.blocking_share = 1;
  InProcessServer server(bounds);
  absl::Notification entered, release;
  std::thread holder([&] {
    const absl::Status s = server.dispatcher().RunBlocking(
        RpcMethod::kExtenderFilter, absl::Now() + absl::Seconds(5),
        [&](const common::WorkDeadline&) {
          entered.Notify();
          release.WaitForNotificationWithTimeout(absl::Seconds(5));
          return absl::OkStatus();
        });
    EXPECT_TRUE(s.ok()) << s;
  });
  ASSERT_TRUE(entered.WaitForNotificationWithTimeout(absl::Seconds(2)));
  bool ran = false;
  const absl::Time start = absl::Now();
  const absl::Status refused = server.dispatcher().RunBlocking(
      RpcMethod::kExtenderPrioritize, start + absl::Milliseconds(200),
      [&](const common::WorkDeadline&) {
        ran = true;
        return absl::OkStatus();
      });
  const absl::Duration waited = absl::Now() - start;
  release.Notify();
  holder.join();
  EXPECT_FALSE(ran);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_GE(waited, absl::Milliseconds(190));
  EXPECT_LT(waited, absl::Seconds(1));
  EXPECT_EQ(server.Shed("extender/prioritize", "entry_point_share"), 1);
  EXPECT_EQ(server.Answered("extender/filter", "OK"), 1);
}

}  // namespace
}  // namespace gpuest::server
