// server/metrics: observations of known durations land in the buckets they belong to,
// in the text /metrics serves (its serving over HTTP: the integration tests).
#include "server/metrics.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/support/prometheus_text.h"

namespace gpuest::server {
namespace {

using testing::SumSamples;

std::vector<testing::Sample> Scrape(const Metrics& metrics) {
  auto samples = testing::ParsePrometheusText(metrics.Text());
  EXPECT_TRUE(samples.ok()) << samples.status();
  return samples.ok() ? *samples : std::vector<testing::Sample>{};
}

TEST(MetricsTable, DurationsLandInTheirBuckets) {
  auto metrics = Metrics::Create();
  // 3 calls within the 1 ms objective, 2 beyond it, 1 beyond the last bound (2.5 s).
  for (double seconds : {10e-6, 400e-6, 1e-3, 1.5e-3, 0.2, 3.0}) {
    metrics->RequestStarted(RpcMethod::kEstimate);
    metrics->RequestFinished(RpcMethod::kEstimate, absl::StatusCode::kOk, seconds);
  }
  metrics->RequestStarted(RpcMethod::kEstimate);  // Still running.
  metrics->RequestStarted(RpcMethod::kListEstimators);
  metrics->RequestFinished(RpcMethod::kListEstimators, absl::StatusCode::kInvalidArgument,
                           0.01);

  const std::vector<testing::Sample> s = Scrape(*metrics);
  const std::string bucket = "gpuest_request_duration_seconds_bucket";
  auto estimate_bucket = [&](const std::string& le) {
    return SumSamples(s, bucket, {{"method", "Estimate"}, {"code", "OK"}, {"le", le}});
  };
  EXPECT_EQ(estimate_bucket("2.5e-05"), 1);
  EXPECT_EQ(estimate_bucket("0.0005"), 2);
  EXPECT_EQ(estimate_bucket("0.001"), 3);  // A bound holds what equals it.
  EXPECT_EQ(estimate_bucket("0.0025"), 4);
  EXPECT_EQ(estimate_bucket("0.5"), 5);
  EXPECT_EQ(estimate_bucket("2.5"), 5);
  EXPECT_EQ(estimate_bucket("+Inf"), 6);
  EXPECT_NEAR(SumSamples(s, "gpuest_request_duration_seconds_sum",
                         {{"method", "Estimate"}, {"code", "OK"}})
                  .value_or(-1),
              10e-6 + 400e-6 + 1e-3 + 1.5e-3 + 0.2 + 3.0, 1e-9);
  EXPECT_EQ(SumSamples(s, "gpuest_requests_total", {{"method", "Estimate"}}), 6);
  EXPECT_EQ(SumSamples(s, "gpuest_requests_total",
                       {{"method", "ListEstimators"}, {"code", "INVALID_ARGUMENT"}}),
            1);
  EXPECT_EQ(SumSamples(s, "gpuest_requests_in_flight", {{"method", "Estimate"}}), 1);
  EXPECT_EQ(SumSamples(s, "gpuest_requests_in_flight", {{"method", "ListEstimators"}}),
            0);
}

TEST(MetricsTable, EstimatorsAndInfoGauges) {
  auto metrics = Metrics::Create();
  metrics->SetBuildInfo("9.9.9", "1.51.1");
  metrics->SetModels("2-00000000000000ff", {{"horus", "cpu"}, {"allocsim", "cpu"}});
  metrics->EstimatorObserved("horus", 30e-6);
  metrics->EstimatorObserved("allocsim", 0.02);
  metrics->EstimatorObserved("allocsim", 0.03);
  metrics->EstimatorObserved("not-loaded", 0.1);  // Ignored: no series for it.

  const std::vector<testing::Sample> s = Scrape(*metrics);
  const std::string count = "gpuest_estimator_duration_seconds_count";
  EXPECT_EQ(SumSamples(s, count, {{"estimator", "horus"}}), 1);
  EXPECT_EQ(SumSamples(s, count, {{"estimator", "allocsim"}}), 2);
  EXPECT_EQ(SumSamples(s, count, {{"estimator", "not-loaded"}}), std::nullopt);
  EXPECT_EQ(SumSamples(s, "gpuest_estimator_duration_seconds_bucket",
                       {{"estimator", "allocsim"}, {"le", "0.025"}}),
            1);
  EXPECT_EQ(SumSamples(s, "gpuest_build_info",
                       {{"version", "9.9.9"}, {"grpc_version", "1.51.1"}}),
            1);
  EXPECT_EQ(SumSamples(s, "gpuest_models_info",
                       {{"models_version", "2-00000000000000ff"}, {"estimators", "2"}}),
            1);
  EXPECT_EQ(
      SumSamples(s, "gpuest_estimator_info", {{"estimator", "horus"}, {"device", "cpu"}}),
      1);
}

// After a reload: one models_info series, the new version's; the estimators of both
// sets keep their latency series; each outcome counted apart, both shown from 0.
TEST(MetricsTable, AReloadReplacesTheModelsInfoAndCountsItsOutcome) {
  auto metrics = Metrics::Create();
  metrics->SetModels("2-00000000000000ff", {{"horus", "cpu"}, {"allocsim", "cpu"}});
  std::vector<testing::Sample> s = Scrape(*metrics);
  EXPECT_EQ(SumSamples(s, "gpuest_model_reloads_total", {{"outcome", "success"}}), 0);
  EXPECT_EQ(SumSamples(s, "gpuest_model_reloads_total", {{"outcome", "failure"}}), 0);

  metrics->ModelsReloaded(false);
  metrics->SetModels("3-0000000000000abc",
                     {{"horus", "cpu"}, {"allocsim", "cpu"}, {"analytic", "cuda"}});
  metrics->ModelsReloaded(true);
  metrics->ModelsReloaded(false);
  metrics->EstimatorObserved("analytic", 0.01);
  metrics->EstimatorObserved("horus", 0.01);

  s = Scrape(*metrics);
  EXPECT_EQ(SumSamples(s, "gpuest_models_info"), 1) << "one series: the new version";
  EXPECT_EQ(SumSamples(s, "gpuest_estimator_info"), 3) << "the new set's estimators";
  EXPECT_EQ(SumSamples(s, "gpuest_estimator_info",
                       {{"estimator", "analytic"}, {"device", "cuda"}}),
            1);
  EXPECT_EQ(SumSamples(s, "gpuest_models_info",
                       {{"models_version", "3-0000000000000abc"}, {"estimators", "3"}}),
            1);
  EXPECT_EQ(SumSamples(s, "gpuest_model_reloads_total", {{"outcome", "success"}}), 1);
  EXPECT_EQ(SumSamples(s, "gpuest_model_reloads_total", {{"outcome", "failure"}}), 2);
  const std::string count = "gpuest_estimator_duration_seconds_count";
  EXPECT_EQ(SumSamples(s, count, {{"estimator", "analytic"}}), 1);
  EXPECT_EQ(SumSamples(s, count, {{"estimator", "horus"}}), 1);
}

}  // namespace
}  // namespace gpuest::server
