// Load, deadlines and what gRPC refuses by itself, against the real server: a call
// refused or stopped gets its code at once and is counted so in /metrics, never OK.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gpuest/client.h"
#include "gtest/gtest.h"
#include "tests/support/examples.h"
#include "tests/support/prometheus_text.h"
#include "tests/support/server_process.h"
#include "tests/support/traced_steps.h"

namespace gpuest {
namespace {

using testing::ServerProcess;

// A call replaying this many temporaries takes about a quarter of a second end to end
// on the 2-core development VM (258-278 ms, 2026-11-23).
constexpr int kLongTrace = 1'000'000;

std::unique_ptr<Client> ClientOf(const ServerProcess& server) {
  ClientOptions options;
  options.targets = {server.target()};
  options.default_deadline = absl::Seconds(60);
  options.max_message_bytes = 64 << 20;  // The server's limit is the one under test.
  auto client = Client::Create(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

std::vector<testing::Sample> Scrape(const ServerProcess& server) {
  auto text = testing::HttpGet(server.metrics_port(), "/metrics");
  EXPECT_TRUE(text.ok()) << text.status();
  auto samples = testing::ParsePrometheusText(text.ok() ? *text : "");
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::vector<testing::Sample>{};
}

// Absent series read as 0 here: each test also checks a series it expects non-zero.
double Count(const std::vector<testing::Sample>& s, const std::string& name,
             const std::map<std::string, std::string>& labels) {
  return testing::SumSamples(s, name, labels).value_or(0);
}

double Calls(const std::vector<testing::Sample>& s, const std::string& code) {
  return Count(s, "gpuest_requests_total", {{"method", "Estimate"}, {"code", code}});
}

// /metrics once the server has answered every call it took.
std::vector<testing::Sample> ScrapeWhenIdle(const ServerProcess& server) {
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  std::vector<testing::Sample> s = Scrape(server);
  while (Count(s, "gpuest_requests_in_flight", {}) > 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
    s = Scrape(server);
  }
  return s;
}

// Sends n calls at once and waits for every outcome.
std::vector<absl::Status> EstimateAtOnce(const Client& client,
                                         const v1::EstimateRequest& request, int n,
                                         absl::Duration deadline) {
  absl::Mutex mu;
  std::vector<absl::Status> outcomes;
  for (int i = 0; i < n; ++i) {
    client.EstimateAsync(
        request,
        [&](absl::StatusOr<v1::EstimateResponse> r) {
          absl::MutexLock lock(&mu);
          outcomes.push_back(r.status());
        },
        deadline);
  }
  absl::MutexLock lock(&mu);
  auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return static_cast<int>(outcomes.size()) == n;
  };
  mu.Await(absl::Condition(&all));
  return outcomes;
}

// How long one call takes end to end; the server learns its time per call from it.
absl::Duration TimedCall(const Client& client, const v1::EstimateRequest& request) {
  const absl::Time before = absl::Now();
  const auto answer = client.Estimate(request);
  EXPECT_TRUE(answer.ok()) << answer.status();
  return absl::Now() - before;
}

int CountCode(const std::vector<absl::Status>& outcomes, absl::StatusCode code) {
  return static_cast<int>(
      std::count_if(outcomes.begin(), outcomes.end(),
                    [code](const absl::Status& s) { return s.code() == code; }));
}

TEST(Overload, AFullQueueRefusesAtOnceAndCountsTheShedCalls) {
  auto server = ServerProcess::Start({"--workers=1", "--max_queued=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = ClientOf(**server);
  ASSERT_TRUE(client);
  // One worker busy for a quarter of a second or more per call, one place in the queue:
  // of calls sent at once, those that find both taken are refused.
  constexpr int kCalls = 6;
  const auto outcomes = EstimateAtOnce(*client, testing::LongTracedStep(kLongTrace),
                                       kCalls, absl::Seconds(120));
  const int ok = CountCode(outcomes, absl::StatusCode::kOk);
  const int refused = CountCode(outcomes, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ok + refused, kCalls) << outcomes.front();
  EXPECT_GE(refused, 1);
  EXPECT_GE(ok, 2);  // The first to arrive, and one queued behind it.

  const auto s = ScrapeWhenIdle(**server);
  EXPECT_EQ(Calls(s, "OK"), ok);
  EXPECT_EQ(Calls(s, "RESOURCE_EXHAUSTED"), refused);
  EXPECT_EQ(testing::SumSamples(s, "gpuest_requests_shed_total",
                                {{"method", "Estimate"}, {"reason", "queue_full"}}),
            refused);
  EXPECT_EQ(Count(s, "gpuest_requests_queued", {}), 0);
}

TEST(Overload, ACallWhoseDeadlineTheQueueWouldOutlastIsRefusedAtOnce) {
  // Room for the nearly four times longer trace below.
  constexpr int kRunningTrace = 3'900'000;
  auto server = ServerProcess::Start(
      {"--workers=1", "--max_message_size=67108864", "--max_trace_events=4000000"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = ClientOf(**server);
  ASSERT_TRUE(client);
  const v1::EstimateRequest long_call = testing::LongTracedStep(kLongTrace);
  // One call's time as the server's admission sees it (its work, not the transfer of
  // the large request, which on a loaded machine can stretch the client's timing and
  // with it the deadline below).
  const absl::Duration timed = TimedCall(*client, long_call);
  const absl::Duration one_call = std::min(
      timed, absl::Seconds(Count(Scrape(**server), "gpuest_request_duration_seconds_sum",
                                 {{"method", "Estimate"}, {"code", "OK"}})));

  // One call running, two queued behind it: a further call can start only after a
  // queued one has run, at least a whole call's time from now, even if the running
  // call ends just before it arrives (with one queued, that left an empty queue and a
  // call admitted to wait for the worker). The running call is nearly four times as long
  // and the two others are sent once it runs, so that it is still running when they have
  // arrived, however slow their transfer on a loaded machine (sent at once, the first
  // could end before the third had arrived). (Shared state: the calls outlive a failed
  // expectation.)
  constexpr int kLongCalls = 3;
  struct Outstanding {
    absl::Mutex mu;
    int finished ABSL_GUARDED_BY(mu) = 0;
  };
  auto outstanding = std::make_shared<Outstanding>();
  auto send = [&](const v1::EstimateRequest& request) {
    client->EstimateAsync(request, [outstanding](absl::StatusOr<v1::EstimateResponse> r) {
      EXPECT_TRUE(r.ok()) << r.status();
      absl::MutexLock lock(&outstanding->mu);
      ++outstanding->finished;
    });
  };
  // Waits until the server's gauges say so (scraped every 2 ms, for a minute at most).
  auto wait_for = [&](double in_flight, double queued) {
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (absl::Now() < give_up) {
      const auto s = Scrape(**server);
      if (Count(s, "gpuest_requests_in_flight", {}) == in_flight &&
          Count(s, "gpuest_requests_queued", {}) == queued) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    return false;
  };
  send(testing::LongTracedStep(kRunningTrace));
  const bool running = wait_for(1, 0);
  EXPECT_TRUE(running) << "the first long call never ran";
  for (int i = 1; i < kLongCalls; ++i) send(long_call);
  const bool queued = running && wait_for(kLongCalls, kLongCalls - 1);
  EXPECT_TRUE(queued) << "the long calls never waited for the worker";
  if (queued) {
    const auto third =
        client->Estimate(testing::ExampleRequest("cnn.json"), one_call / 3);
    // Refused by the server at once; on a slow machine the client's own deadline can
    // come first, but the server must still have refused it rather than queued it.
    EXPECT_TRUE(third.status().code() == absl::StatusCode::kResourceExhausted ||
                third.status().code() == absl::StatusCode::kDeadlineExceeded)
        << third.status();
  }
  {
    absl::MutexLock lock(&outstanding->mu);
    auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(outstanding->mu) {
      return outstanding->finished == kLongCalls;
    };
    outstanding->mu.Await(absl::Condition(&all));
  }
  const auto s = ScrapeWhenIdle(**server);
  EXPECT_EQ(
      testing::SumSamples(s, "gpuest_requests_shed_total",
                          {{"method", "Estimate"}, {"reason", "deadline_unmeetable"}}),
      1);
  EXPECT_EQ(Calls(s, "OK"), 1 + kLongCalls);
  EXPECT_EQ(Calls(s, "RESOURCE_EXHAUSTED"), 1);
}

// The server's own record of one method's calls stopped at their deadline.
struct StoppedCalls {
  double counted = 0;  // gpuest_requests_total{code="DEADLINE_EXCEEDED"}
  double shed = 0;     // Of those, refused before their work started.
  double seconds = 0;  // Their server-side time.
};

StoppedCalls StoppedCallsOf(const std::vector<testing::Sample>& s,
                            const std::string& method) {
  const std::map<std::string, std::string> labels = {{"method", method},
                                                     {"code", "DEADLINE_EXCEEDED"}};
  return {Count(s, "gpuest_requests_total", labels),
          Count(s, "gpuest_requests_shed_total", {{"method", method}}),
          Count(s, "gpuest_request_duration_seconds_sum", labels)};
}

// One call's time end to end and on the server (its server_latency_us): the faster of
// two, so that a first call slowed by a cold start or a busy machine does not make the
// deadlines below long enough to finish in. The rest of `whole` is the transfer of the
// request and the answer.
struct CallTimes {
  absl::Duration whole = absl::InfiniteDuration();
  absl::Duration work = absl::InfiniteDuration();
};

template <typename Call>
CallTimes FasterOfTwo(Call call) {
  CallTimes times;
  for (int i = 0; i < 2; ++i) {
    const absl::Time before = absl::Now();
    const auto answer = call();
    const absl::Duration whole = absl::Now() - before;
    EXPECT_TRUE(answer.ok()) << answer.status();
    if (!answer.ok()) return times;
    times.whole = std::min(times.whole, whole);
    times.work = std::min(times.work, absl::Microseconds(answer->server_latency_us()));
  }
  return times;
}

// Sends call(deadline) until the server itself started one call and stopped it at its
// deadline; returns that call's server-side seconds, or nothing after eight tries. The
// first deadline is the transfer plus `share` of the work. A large request's transfer
// is about half of the call on a slow VM and not the same twice: a deadline can pass
// before the call reaches the service or before it starts (then it is shed), and the
// next one is longer; a call that finished in time makes the next one shorter.
template <typename Call>
std::optional<double> StartedAndStoppedAtItsDeadline(const ServerProcess& server,
                                                     const std::string& method,
                                                     const CallTimes& times, double share,
                                                     Call call) {
  const absl::Duration transfer = times.whole - times.work, step = times.work * 0.15;
  absl::Duration deadline = transfer + times.work * share;
  for (int attempt = 0; attempt < 8; ++attempt) {
    const StoppedCalls before = StoppedCallsOf(ScrapeWhenIdle(server), method);
    const absl::Status status = call(deadline);
    const StoppedCalls after = StoppedCallsOf(ScrapeWhenIdle(server), method);
    if (after.counted == before.counted + 1 && after.shed == before.shed) {
      EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
      return after.seconds - before.seconds;
    }
    deadline = std::max(deadline + (status.ok() ? -step : step), step);
  }
  return std::nullopt;
}

// A call with a deadline that lets it start but not finish stops well before a whole
// call's work on the server, and is counted so.
template <typename Call>
void ExpectStoppedWellBeforeItsEnd(const ServerProcess& server, const std::string& method,
                                   const CallTimes& times, Call call) {
  const std::optional<double> stopped_after =
      StartedAndStoppedAtItsDeadline(server, method, times, 0.2, call);
  ASSERT_TRUE(stopped_after.has_value()) << method << ": no call was started and stopped";
  EXPECT_LT(*stopped_after, absl::ToDoubleSeconds(times.work) * 0.9) << method;
}

TEST(Deadlines, WorkPastItsDeadlineStopsAndIsCountedDeadlineExceeded) {
  auto server = ServerProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = ClientOf(**server);
  ASSERT_TRUE(client);
  const v1::EstimateRequest long_call = testing::LongTracedStep(kLongTrace);
  const CallTimes times = FasterOfTwo([&] { return client->Estimate(long_call); });
  ASSERT_LT(times.work, times.whole);

  ExpectStoppedWellBeforeItsEnd(**server, "Estimate", times,
                                [&](absl::Duration deadline) {
                                  return client->Estimate(long_call, deadline).status();
                                });
}

// Placement estimates the jobs given by description within the call's deadline: the
// replay stops there, RankGpus starts no GPU after it, and both are counted so.
TEST(Deadlines, PlacementPastItsDeadlineStopsAndIsCountedDeadlineExceeded) {
  auto server = ServerProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = ClientOf(**server);
  ASSERT_TRUE(client);
  v1::CheckPlacementRequest check;
  check.mutable_gpu()->set_catalog_id("a100-80gb");
  *check.mutable_candidate()->mutable_description() = testing::LongTracedStep(kLongTrace);
  const CallTimes times = FasterOfTwo([&] { return client->CheckPlacement(check); });
  ASSERT_LT(times.work, times.whole);
  ExpectStoppedWellBeforeItsEnd(**server, "CheckPlacement", times,
                                [&](absl::Duration deadline) {
                                  return client->CheckPlacement(check, deadline).status();
                                });

  // Every GPU of the catalog is a replay of its own: a few fit in the deadline, not
  // all (the catalog holds 27).
  v1::RankGpusRequest rank;
  *rank.mutable_job()->mutable_description() = check.candidate().description();
  const std::optional<double> rank_stopped_after = StartedAndStoppedAtItsDeadline(
      **server, "RankGpus", times, 2,
      [&](absl::Duration deadline) { return client->RankGpus(rank, deadline).status(); });
  ASSERT_TRUE(rank_stopped_after.has_value())
      << "no RankGpus call was started and stopped";
  EXPECT_LT(*rank_stopped_after, absl::ToDoubleSeconds(times.work) * 5);

  const auto s = ScrapeWhenIdle(**server);
  auto calls = [&](const std::string& method, const std::string& code) {
    return Count(s, "gpuest_requests_total", {{"method", method}, {"code", code}});
  };
  EXPECT_EQ(calls("RankGpus", "OK"), 0);
  EXPECT_GE(calls("RankGpus", "DEADLINE_EXCEEDED"), 1);
}

TEST(Memory, RequestBytesInFlightAreBounded) {
  const v1::EstimateRequest large = testing::LongTracedStep(kLongTrace / 2);
  // What one such request holds in memory once parsed, as the server measures it.
  v1::EstimateRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(large.SerializeAsString()));
  const int64_t one = static_cast<int64_t>(parsed.SpaceUsedLong());
  // Room for one large request at a time, not two.
  auto server = ServerProcess::Start(
      {"--workers=1", "--max_bytes_in_flight=" + std::to_string(one * 3 / 2)});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = ClientOf(**server);
  ASSERT_TRUE(client);
  constexpr int kCalls = 4;
  const auto outcomes = EstimateAtOnce(*client, large, kCalls, absl::Seconds(120));
  const int ok = CountCode(outcomes, absl::StatusCode::kOk);
  const int refused = CountCode(outcomes, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ok + refused, kCalls) << outcomes.front();
  EXPECT_GE(ok, 1);
  EXPECT_GE(refused, 1);
  const auto s = ScrapeWhenIdle(**server);
  EXPECT_EQ(testing::SumSamples(s, "gpuest_requests_shed_total",
                                {{"method", "Estimate"}, {"reason", "bytes_in_flight"}}),
            refused);
  EXPECT_EQ(testing::SumSamples(s, "gpuest_request_bytes_in_flight"), 0);
  // A small request after them is admitted.
  EXPECT_TRUE(client->Estimate(testing::ExampleRequest("cnn.json")).ok());
}

// A short call at low load is worked on by the gRPC thread that received it (no
// hand-off to a worker); a large one, or any with --inline_max_request_bytes=0, waits
// for a worker. Both are answered the same.
TEST(WhereWorkRuns, ShortCallsAtLowLoadRunOnTheGrpcThreadLargeOnesOnAWorker) {
  auto run_here = [](const std::vector<testing::Sample>& s) {
    return Count(s, "gpuest_requests_run_on_grpc_thread_total", {{"method", "Estimate"}});
  };
  const v1::EstimateRequest small = testing::ExampleRequest("cnn.json");
  const v1::EstimateRequest large = testing::LongTracedStep(20'000);
  ASSERT_GT(large.SpaceUsedLong(), 64u << 10);
  {
    auto server = ServerProcess::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    auto client = ClientOf(**server);
    ASSERT_TRUE(client);
    auto answer = client->Estimate(small);
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(run_here(Scrape(**server)), 1);
    ASSERT_TRUE(client->Estimate(large).ok());
    const auto s = ScrapeWhenIdle(**server);
    EXPECT_EQ(run_here(s), 1);
    EXPECT_EQ(Calls(s, "OK"), 2);
    EXPECT_FALSE(answer->results().empty());
  }
  {
    auto server = ServerProcess::Start({"--inline_max_request_bytes=0"});
    ASSERT_TRUE(server.ok()) << server.status();
    auto client = ClientOf(**server);
    ASSERT_TRUE(client);
    ASSERT_TRUE(client->Estimate(small).ok());
    const auto s = ScrapeWhenIdle(**server);
    EXPECT_EQ(run_here(s), 0);
    EXPECT_EQ(Calls(s, "OK"), 1);
  }
}

TEST(RefusedByGrpc, ARequestOverTheMessageSizeIsCountedFailed) {
  auto server = ServerProcess::Start({"--max_message_size=200000"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = ClientOf(**server);
  ASSERT_TRUE(client);
  const v1::EstimateRequest too_large = testing::LongTracedStep(100'000);
  ASSERT_GT(too_large.ByteSizeLong(), 200000u);
  const auto refused = client->Estimate(too_large);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  EXPECT_TRUE(client->Estimate(testing::ExampleRequest("cnn.json")).ok());
  // gRPC counts the answered call finished a little after the service does (once it has
  // sent the answer): wait for that, or for a minute at most.
  auto s = ScrapeWhenIdle(**server);
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (Count(s, "gpuest_grpc_calls_started_total", {}) -
                 Count(s, "gpuest_grpc_calls_finished_total", {}) >
             1 &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
    s = Scrape(**server);
  }
  // The service never saw it: gRPC refused it before handing it over, and its own
  // count (channelz) has it as started but never finished, unlike every other call.
  EXPECT_EQ(Calls(s, "OK"), 1);
  EXPECT_EQ(Count(s, "gpuest_requests_total", {}), 1);
  const double started = Count(s, "gpuest_grpc_calls_started_total", {});
  const double finished = Count(s, "gpuest_grpc_calls_finished_total", {});
  EXPECT_EQ(started, 2);
  EXPECT_EQ(started - finished, 1);
}

TEST(RefusedByGrpc, AResponseOverTheMessageSizeIsCountedResourceExhausted) {
  v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
  request.set_gpu("a100-40gb");
  // Measure the answer, then serve with a limit the request fits and the answer not.
  size_t answer_bytes = 0;
  {
    auto server = ServerProcess::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    auto answer = ClientOf(**server)->Estimate(request);
    ASSERT_TRUE(answer.ok()) << answer.status();
    answer_bytes = answer->ByteSizeLong();
  }
  const size_t limit = (request.ByteSizeLong() + answer_bytes) / 2;
  ASSERT_LT(request.ByteSizeLong() + 64, limit) << "the example's answer is too small";
  auto server = ServerProcess::Start({"--max_message_size=" + std::to_string(limit)});
  ASSERT_TRUE(server.ok()) << server.status();
  const auto refused = ClientOf(**server)->Estimate(request);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
      << refused.status();
  const auto s = ScrapeWhenIdle(**server);
  EXPECT_EQ(Calls(s, "OK"), 0);
  EXPECT_EQ(testing::SumSamples(s, "gpuest_requests_total",
                                {{"method", "Estimate"}, {"code", "RESOURCE_EXHAUSTED"}}),
            1);
}

TEST(MetricsEndpoint, IdleAndHalfSentConnectionsDoNotBlockAScrape) {
  auto server = ServerProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->metrics_port();
  // 49 silent connections and one that sent half a request.
  std::vector<int> held;
  for (int i = 0; i < 49; ++i) held.push_back(testing::OpenConnection(port));
  held.push_back(testing::OpenConnection(port, "GET /metrics HTTP/1.1\r\nHost: 12"));
  for (int fd : held) ASSERT_GE(fd, 0);
  absl::SleepFor(absl::Milliseconds(200));  // Let the server take them all.
  // Before, each such connection held one of /metrics' threads for its request
  // timeout: 2 threads x 30 s, then 8 x 2 s (50 of them: 12 s).
  const absl::Time start = absl::Now();
  auto scrape = std::async(std::launch::async,
                           [port] { return testing::HttpGet(port, "/metrics"); });
  ASSERT_EQ(scrape.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "/metrics did not answer beside idle connections";
  EXPECT_LT(absl::Now() - start, absl::Seconds(3))
      << "/metrics answered only after the idle connections timed out";
  const auto text = scrape.get();
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("gpuest_build_info"), std::string::npos);
  for (int fd : held) close(fd);
}

TEST(ClientRetries, CallsRideOutASigkillAndRestartWithinTheirDeadline) {
  auto first = ServerProcess::Start();
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string target = (*first)->target();
  ClientOptions options;
  options.targets = {target};
  options.default_deadline = absl::Seconds(30);  // Outlasts a restart.
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const v1::EstimateRequest request = testing::ExampleRequest("cnn.json");

  absl::Mutex mu;
  bool stop = false;
  int ok = 0;
  std::vector<absl::Status> failures;
  std::thread caller([&] {
    while (true) {
      {
        absl::MutexLock lock(&mu);
        if (stop) return;
      }
      const auto r = (*client)->Estimate(request);
      absl::MutexLock lock(&mu);
      if (r.ok()) {
        ++ok;
      } else {
        failures.push_back(r.status());
      }
    }
  });
  auto wait_for_calls = [&](int n) {
    absl::MutexLock lock(&mu);
    auto reached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return ok + static_cast<int>(failures.size()) >= n;
    };
    return mu.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(60));
  };
  // No ASSERT while the caller runs: it must be stopped and joined whatever happens.
  int before_restart = 0;
  // Serves until the caller has stopped.
  absl::StatusOr<std::unique_ptr<ServerProcess>> second =
      absl::UnavailableError("not started");
  if (wait_for_calls(20)) {
    (*first)->Signal(SIGKILL);
    EXPECT_TRUE((*first)->WaitForExit(absl::Seconds(10)).ok());
    {
      absl::MutexLock lock(&mu);
      before_restart = ok + static_cast<int>(failures.size());
    }
    second = ServerProcess::Start({"--listen=" + target});
    EXPECT_TRUE(second.ok()) << second.status();
    EXPECT_TRUE(wait_for_calls(before_restart + 20)) << "no calls answered after restart";
  } else {
    ADD_FAILURE() << "no calls answered before the restart";
  }
  {
    absl::MutexLock lock(&mu);
    stop = true;
  }
  caller.join();
  EXPECT_TRUE(failures.empty())
      << failures.size() << " calls failed, the first: " << failures.front();
  EXPECT_GE(ok, before_restart + 20);
}

}  // namespace
}  // namespace gpuest
