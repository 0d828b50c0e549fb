// /metrics fetched over HTTP and parsed: counts equal the calls made.
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
  auto client = Client::Create(
      {.targets = {(*server)->target()}, .default_deadline = absl::Seconds(5)});
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
  // The latency objective is a bucket boundary; the +Inf bucket holds every call.
  EXPECT_EQ(SumSamples(s, dur + "_bucket",
                       {{"method", "Estimate"}, {"code", "OK"}, {"le", "+Inf"}}),
            7);
  EXPECT_LE(SumSamples(s, dur + "_bucket",
                       {{"method", "Estimate"}, {"code", "OK"}, {"le", "0.001"}}),
            7);
  bool has_25us_bucket = false, has_1ms_bucket = false;
  for (const auto& sample : s) {
    if (sample.name != dur + "_bucket") continue;
    has_25us_bucket |= sample.labels.at("le") == "2.5e-05";
    has_1ms_bucket |= sample.labels.at("le") == "0.001";
  }
  EXPECT_TRUE(has_25us_bucket);
  EXPECT_TRUE(has_1ms_bucket);
  EXPECT_EQ(
      SumSamples(s, "gpuest_estimator_duration_seconds_count", {{"estimator", "horus"}}),
      7);
  EXPECT_EQ(SumSamples(s, "gpuest_requests_in_flight"), 0);
  EXPECT_EQ(SumSamples(s, "gpuest_build_info"), 1);
  EXPECT_EQ(SumSamples(s, "gpuest_models_info"), 1);
  EXPECT_GT(SumSamples(s, dur + "_sum", {{"method", "Estimate"}}), 0);
}

}  // namespace
}  // namespace gpuest
