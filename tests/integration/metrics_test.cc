// /metrics fetched over HTTP and parsed: counts equal the calls made.
#include <algorithm>
#include <string>
#include <vector>

#include "gpuest/client.h"
#include "gtest/gtest.h"
#include "tests/support/examples.h"
#include "tests/support/prometheus_text.h"
#include "tests/support/server_process.h"

namespace gpuest {
namespace {

using testing::SumSamples;

TEST(Metrics, HistogramCountsEqualTheCallsMade) {
  auto server = testing::ServerProcess::Start();
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions options;
  options.targets = {(*server)->target()};
  options.default_deadline = absl::Seconds(5);
  auto client = Client::Create(options);
  ASSERT_TRUE(client.ok());

  const v1::EstimateRequest good = testing::ExampleRequest("cnn.json");
  v1::EstimateRequest bad = good;
  bad.mutable_model()->set_batch_size(-1);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE((*client)->Estimate(good).ok());
  for (int i = 0; i < 3; ++i) ASSERT_FALSE((*client)->Estimate(bad).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE((*client)->ListEstimators().ok());

  auto text = testing::HttpGet((*server)->metrics_port(), "/metrics");
  ASSERT_TRUE(text.ok()) << text.status();
  auto samples = testing::ParsePrometheusText(*text);
  ASSERT_TRUE(samples.ok()) << samples.status();
  const auto& s = *samples;
  const std::string dur = "gpuest_request_duration_seconds";
  EXPECT_EQ(SumSamples(s, dur + "_count", {{"method", "Estimate"}, {"code", "OK"}}), 7);
  EXPECT_EQ(SumSamples(s, dur + "_count",
                       {{"method", "Estimate"}, {"code", "INVALID_ARGUMENT"}}),
            3);
  EXPECT_EQ(SumSamples(s, dur + "_count", {{"method", "ListEstimators"}, {"code", "OK"}}),
            2);
  EXPECT_EQ(SumSamples(s, "gpuest_requests_total", {{"method", "Estimate"}}), 10);
  EXPECT_EQ(SumSamples(s, "gpuest_requests_total", {{"method", "ListEstimators"}}), 2);
  // Each series has the declared bucket bounds, from 25 us with one at the 1 ms
  // objective, cumulative, and the +Inf bucket holds every call. (Which bucket a call
  // lands in depends on its real latency; tests/unit/server/metrics_test.cc checks that
  // with known durations.)
  const std::vector<std::string> want_bounds = {
      "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025",
      "0.005",   "0.01",  "0.025",  "0.1",     "0.5",    "2.5",   "+Inf"};
  std::vector<std::string> bounds;
  std::vector<double> counts;
  for (const auto& sample : s) {
    if (sample.name != dur + "_bucket" || sample.labels.at("method") != "Estimate" ||
        sample.labels.at("code") != "OK") {
      continue;
    }
    bounds.push_back(sample.labels.at("le"));
    counts.push_back(sample.value);
  }
  EXPECT_EQ(bounds, want_bounds);
  EXPECT_TRUE(std::is_sorted(counts.begin(), counts.end())) << "not cumulative";
  EXPECT_EQ(SumSamples(s, dur + "_bucket",
                       {{"method", "Estimate"}, {"code", "OK"}, {"le", "+Inf"}}),
            7);
  EXPECT_EQ(
      SumSamples(s, "gpuest_estimator_duration_seconds_count", {{"estimator", "horus"}}),
      7);
  EXPECT_EQ(SumSamples(s, "gpuest_requests_in_flight", {{"method", "Estimate"}}), 0);
  EXPECT_EQ(SumSamples(s, "gpuest_requests_in_flight", {{"method", "ListEstimators"}}),
            0);
  EXPECT_EQ(SumSamples(s, "gpuest_build_info"), 1);
  EXPECT_EQ(SumSamples(s, "gpuest_models_info"), 1);
  EXPECT_GT(SumSamples(s, dur + "_sum", {{"method", "Estimate"}}), 0);
}

}  // namespace
}  // namespace gpuest
