// The placement library: the memory fit, the shipped contention model, the fitter's
// solver and data, and the PlacementEngine over the shipped model repository.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/units.h"
#include "estimators/core/engine.h"
#include "estimators/core/field_bounds.h"
#include "estimators/core/gpu_profiles.h"
#include "estimators/core/registry.h"
#include "estimators/default_factories.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "lab/contention/contention_fit.h"
#include "placement/contention_model.h"
#include "placement/memory_fit.h"
#include "placement/placement_engine.h"
#include "placement/placement_job.h"
#include "placement/placement_verdict.h"
#include "tests/support/examples.h"

namespace gpuest {
namespace {

const std::string kContentionFile = ContentionModelPath(GPUEST_MODELS_DIR);
const std::string kLucidDir = std::string(GPUEST_DATA_DIR) + "/../lucid";

TEST(MemoryFitTest, EachProcessPaysItsOwnContext) {
  // Two jobs measured at 10 GiB each (their contexts included) and a candidate of 19 GiB
  // (its own context included) on 40 GiB: 39 GiB taken, 1 GiB left.
  const MemoryFit fit = FitMemory(40 * kGiB, {10 * kGiB, 10 * kGiB}, 19 * kGiB);
  EXPECT_TRUE(fit.fits);
  EXPECT_EQ(fit.used_bytes, 20 * kGiB);
  EXPECT_EQ(fit.headroom_bytes, static_cast<int64_t>(kGiB));
  const MemoryFit over = FitMemory(40 * kGiB, {10 * kGiB, 10 * kGiB}, 21 * kGiB);
  EXPECT_FALSE(over.fits);
  EXPECT_EQ(over.headroom_bytes, -static_cast<int64_t>(kGiB));
}

TEST(MemoryFitTest, NodeReportedUseCountsWhenLarger) {
  // The node sees 30 GiB in use; the jobs listed hold 12: the node's figure counts.
  EXPECT_EQ(FitMemory(40 * kGiB, {12 * kGiB}, 8 * kGiB, 30 * kGiB).used_bytes, 30 * kGiB);
  // A job estimated but not started is not in the node's figure: the sum counts.
  EXPECT_EQ(FitMemory(40 * kGiB, {12 * kGiB}, 8 * kGiB, 5 * kGiB).used_bytes, 12 * kGiB);
}

TEST(MemoryFitTest, AbsurdFiguresSaturateInsteadOfWrapping) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  const MemoryFit fit = FitMemory(40 * kGiB, {max, max}, max);
  EXPECT_FALSE(fit.fits);
  EXPECT_EQ(fit.used_bytes, max);
  EXPECT_EQ(fit.headroom_bytes, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(SaturatingAdd(max - 1, 1), max);
  EXPECT_EQ(SaturatingAdd(max, 1), max);
  EXPECT_EQ(SignedHeadroom(max, 0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(SignedHeadroom(0, 5), -5);
}

TEST(GpuCatalogTest, NvidiaSmiNamesAndMigProfilesResolve) {
  auto gpus =
      GpuProfiles::LoadFile(std::string(GPUEST_MODELS_DIR) + "/gpu_profiles.json");
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_NE(gpus->Find("NVIDIA A100-SXM4-80GB"), nullptr);
  EXPECT_EQ(gpus->Find("NVIDIA A100-SXM4-80GB")->id, "a100-80gb");
  EXPECT_EQ(gpus->Find("nvidia h100 80gb hbm3")->id, "h100-80gb");
  const GpuProfile* slice = gpus->Find("NVIDIA A100-SXM4-40GB MIG 1g.5gb");
  ASSERT_NE(slice, nullptr);
  EXPECT_EQ(slice->id, "a100-40gb-mig-1g.5gb");
  EXPECT_EQ(slice->memory_bytes, 4864 * kMiB);  // 4.75 GiB.
  EXPECT_TRUE(IsMigProfile(*slice));
  EXPECT_FALSE(IsMigProfile(gpus->Default()));
  int mig = 0;
  for (const GpuProfile& p : gpus->All()) {
    if (!IsMigProfile(p)) continue;
    ++mig;
    // A profile is a slice of its parent: the id's prefix, less memory.
    const GpuProfile* parent = gpus->Find(p.id.substr(0, p.id.find("-mig-")));
    ASSERT_NE(parent, nullptr) << p.id;
    EXPECT_LT(p.memory_bytes, parent->memory_bytes) << p.id;
    EXPECT_EQ(p.architecture, parent->architecture) << p.id;
  }
  EXPECT_EQ(mig, 17);  // A100 40GB: 5, A100 80GB: 6, H100 80GB: 6.
}

TEST(ContentionFitTest, LeastSquaresRecoversAnExactLine) {
  // y = 1 + 2a - 3b, checked by hand at four points.
  const std::vector<std::vector<double>> x = {{1, 0, 0}, {1, 1, 0}, {1, 0, 1}, {1, 2, 3}};
  const std::vector<double> y = {1, 3, -2, -4};
  auto w = contention::LeastSquares(x, y, 0);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NEAR((*w)[0], 1, 1e-9);
  EXPECT_NEAR((*w)[1], 2, 1e-9);
  EXPECT_NEAR((*w)[2], -3, 1e-9);
  EXPECT_EQ(contention::LeastSquares({{1, 1}, {1, 1}}, {1, 2}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ContentionFitTest, EveryLucidPairJoinsItsSingleProfiles) {
  auto data = contention::ReadLucid(kLucidDir);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->pairs, 913);
  EXPECT_EQ(data->joined, 913);
  EXPECT_EQ(data->samples.size(), 2u * 913);
  EXPECT_EQ(data->models.size(), 9u);
}

TEST(ContentionFitTest, ModelBeatsBothRulesLeavingModelsOut) {
  contention::FitOptions options;
  options.lucid_dir = kLucidDir;
  options.gpumemnet_dir = GPUEST_DATA_DIR;
  auto result = contention::FitContention(options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->table.size(), 6u);
  const auto& model = result->table[0];
  const auto& sum_rule = result->table[1];
  const auto& lucid_rule = result->table[2];
  const auto& head = result->table[4];
  EXPECT_LT(model.speed_mae, sum_rule.speed_mae);
  EXPECT_LT(model.speed_mae, lucid_rule.speed_mae);
  EXPECT_GT(model.pair_accuracy, sum_rule.pair_accuracy);
  // Thresholding the interval's lower end finds more bad pairs than the point does.
  EXPECT_GT(result->table[5].bad_recall, model.bad_recall);
  // The verdict head, its operating point chosen in inner folds only, finds more bad
  // pairs than the point speed below 0.85, and more precisely than the sum rule.
  EXPECT_GT(head.bad_recall, model.bad_recall + 0.1);
  EXPECT_GT(head.bad_precision, sum_rule.bad_precision + 0.1);
  // The level-adjusted interval covers more held-out jobs than the nominal level did
  // (measured: 0.873 against 0.835, for a nominal 90 %).
  EXPECT_GT(result->interval_coverage_level_adjusted,
            result->interval_coverage_cross_fitted + 0.02);
  EXPECT_LE(result->interval_coverage_level_adjusted, 0.92);
  EXPECT_GT(result->interval_level, 0.9);
  // The curve trades precision for recall as the operating probability rises.
  ASSERT_GE(result->pr_curve.size(), 2u);
  EXPECT_GE(result->pr_curve.front().recall, result->pr_curve.back().recall);
  EXPECT_LE(result->pr_curve.front().precision, result->pr_curve.back().precision);
  // The shipped file is this fit: refit it with gpuest-fit-contention when data changes.
  auto shipped = ContentionModel::Load(kContentionFile);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  ASSERT_EQ(shipped->coefficients.size(), result->model.coefficients.size());
  for (size_t i = 0; i < shipped->coefficients.size(); ++i)
    EXPECT_NEAR(shipped->coefficients[i], result->model.coefficients[i], 1e-9) << i;
  EXPECT_NEAR(shipped->residual_low, result->model.residual_low, 1e-9);
  EXPECT_NEAR(shipped->residual_high, result->model.residual_high, 1e-9);
  EXPECT_NEAR(shipped->verdict_intercept, result->model.verdict_intercept, 1e-9);
  EXPECT_NEAR(shipped->verdict_slope, result->model.verdict_slope, 1e-9);
  EXPECT_NEAR(shipped->verdict_probability, result->model.verdict_probability, 1e-9);
}

TEST(ContentionFitTest, LogisticRegressionRecoversItsCoefficients) {
  // Every u from -1 to 1 in steps of 0.001, with the exact share of positives that
  // p = 1 / (1 + exp(-(0.5 - 3u))) gives, in blocks of 100 (the maximum likelihood
  // estimate of such data is the generating pair, up to the blocks' rounding).
  std::vector<double> u;
  std::vector<bool> y;
  for (int i = -1000; i <= 1000; i += 100) {
    const double x = i / 1000.0;
    const int positives =
        static_cast<int>(std::lround(100.0 / (1.0 + std::exp(-(0.5 - 3 * x)))));
    for (int k = 0; k < 100; ++k) {
      u.push_back(x);
      y.push_back(k < positives);
    }
  }
  const auto [a, b] = contention::FitLogistic(u, y);
  EXPECT_NEAR(a, 0.5, 0.05);
  EXPECT_NEAR(b, -3.0, 0.1);
}

class ShippedContentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = ContentionModel::Load(kContentionFile);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = *m;
  }
  static UtilizationRange Exact(double u) { return {u, u, u}; }
  ContentionModel model_;
};

TEST_F(ShippedContentionTest, LightPairsRunNearFullSpeedHeavyPairsDoNot) {
  const SpeedPrediction light = model_.Predict(Exact(0.1), {Exact(0.1)});
  EXPECT_GE(light.speed, model_.bad_threshold);
  const SpeedPrediction heavy = model_.Predict(Exact(1.0), {Exact(1.0)});
  EXPECT_LT(heavy.speed, model_.bad_threshold);
  for (const SpeedPrediction& p : {light, heavy}) {
    EXPECT_LE(p.low, p.speed);
    EXPECT_GE(p.high, p.speed);
    EXPECT_FALSE(p.extrapolated);
  }
  // Alone: its own speed, exactly.
  const SpeedPrediction alone = model_.Predict(Exact(0.9), {});
  EXPECT_EQ(alone.speed, 1.0);
  EXPECT_EQ(alone.low, 1.0);
}

TEST_F(ShippedContentionTest,
       TheVerdictHeadGivesAProbabilityAndCallsAtItsOperatingPoint) {
  ASSERT_TRUE(model_.HasVerdictHead());
  const SpeedPrediction light = model_.Predict(Exact(0.1), {Exact(0.1)});
  const SpeedPrediction heavy = model_.Predict(Exact(1.0), {Exact(1.0)});
  EXPECT_LT(light.bad_probability, model_.verdict_probability);
  EXPECT_FALSE(model_.CalledBad(light));
  EXPECT_GT(heavy.bad_probability, model_.verdict_probability);
  EXPECT_TRUE(model_.CalledBad(heavy));
  // Monotone in the load beside it.
  EXPECT_LT(model_.Predict(Exact(0.6), {Exact(0.3)}).bad_probability,
            model_.Predict(Exact(0.6), {Exact(0.6)}).bad_probability);
  // A file without the head calls by the point speed.
  ContentionModel plain = model_;
  plain.verdict_slope = 0;
  EXPECT_EQ(plain.CalledBad(heavy), heavy.speed < plain.bad_threshold);
}

TEST_F(ShippedContentionTest, AnUncertainUtilizationWidensTheInterval) {
  const SpeedPrediction exact = model_.Predict(Exact(0.6), {Exact(0.6)});
  const SpeedPrediction ranged = model_.Predict(Exact(0.6), {{0.6, 0.3, 0.9}});
  EXPECT_DOUBLE_EQ(exact.speed, ranged.speed);
  EXPECT_GT(ranged.high - ranged.low, exact.high - exact.low);
}

TEST_F(ShippedContentionTest, MoreThanOneOtherJobIsAnExtrapolatedSummedLoad) {
  const SpeedPrediction three = model_.Predict(Exact(0.5), {Exact(0.3), Exact(0.4)});
  EXPECT_TRUE(three.extrapolated);
  EXPECT_DOUBLE_EQ(three.speed, model_.Predict(Exact(0.5), {Exact(0.7)}).speed);
}

TEST_F(ShippedContentionTest, RoundTripsAndRefusesAFileOfOtherFeatures) {
  auto again = ContentionModel::FromJson(model_.ToJson(), "round trip");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->coefficients, model_.coefficients);
  nlohmann::ordered_json bad = model_.ToJson();
  bad["features"] = {"bias"};
  auto refused = ContentionModel::FromJson(bad, "x.json");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "features"));
}

// The contention model is read by the one strict reader: a misspelt key used to be kept
// as "extra" and its default served; now it stops the load, named.
TEST_F(ShippedContentionTest, RefusesUnknownAndMistypedKeysByName) {
  auto message = [](const nlohmann::ordered_json& json) {
    auto m = ContentionModel::FromJson(json, "x.json");
    return m.ok() ? std::string("accepted") : std::string(m.status().message());
  };
  nlohmann::ordered_json bad = model_.ToJson();
  bad["residual_hi"] = 0.2;
  EXPECT_EQ(message(bad), "x.json: 'residual_hi' is not a known key");
  bad = model_.ToJson();
  bad["smact_to_util"]["slope"] = "1.1";
  EXPECT_EQ(message(bad), "x.json: 'smact_to_util.slope' must be a number");
  bad = model_.ToJson();
  bad["smact_to_util"].erase("mae");
  EXPECT_EQ(message(bad), "x.json: 'smact_to_util.mae' is missing");
  bad = model_.ToJson();
  bad["manifest"] = "fitted by hand";
  EXPECT_EQ(message(bad), "x.json: 'manifest' must be a JSON object");
  EXPECT_EQ(message(model_.ToJson()), "accepted");
}

TEST(UtilizationFromEstimateTest, GractClassesGiveARangeAndOtherMetricsAreRefused) {
  v1::UtilizationEstimate u;
  u.set_metric(v1::UTILIZATION_METRIC_GRACT);
  for (double e : {0.0, 0.3, 0.9, 1.0}) u.add_bin_edges(e);
  for (double p : {0.0, 1.0, 0.0}) u.add_probabilities(p);
  auto r = UtilizationFromEstimate(u, "job");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->value, 0.6);
  EXPECT_DOUBLE_EQ(r->low, 0.3);
  EXPECT_DOUBLE_EQ(r->high, 0.9);
  // 1e308 summed to infinity and the mean to NaN, which read as "acceptable".
  u.set_probabilities(1, 1e308);
  auto overflowing = UtilizationFromEstimate(u, "job");
  EXPECT_EQ(overflowing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(overflowing.status().message(), "job.probabilities[1]"))
      << overflowing.status();
  u.set_probabilities(1, 1.0);
  u.set_metric(v1::UTILIZATION_METRIC_SMACT);
  auto refused = UtilizationFromEstimate(u, "job");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(refused.status().message(), "job.metric"));
}

class PlacementEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto registry =
        EstimatorRegistry::Load(WithDefaultFactories({GPUEST_MODELS_DIR, "cpu"}));
    ASSERT_TRUE(registry.ok()) << registry.status();
    engine_ = new Engine(std::move(*registry), ValidationLimits{});
    auto contention = ContentionModel::Load(kContentionFile);
    ASSERT_TRUE(contention.ok()) << contention.status();
    placement_ = new PlacementEngine(*engine_, *contention);
  }
  static void TearDownTestSuite() {
    delete placement_;
    delete engine_;
  }
  static Engine* engine_;
  static PlacementEngine* placement_;
};
Engine* PlacementEngineTest::engine_ = nullptr;
PlacementEngine* PlacementEngineTest::placement_ = nullptr;

TEST_F(PlacementEngineTest, ChecksMemoryAndContentionOnAMigSliceByItsNvidiaSmiName) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("NVIDIA A100-SXM4-40GB MIG 3g.20gb");
  *request.add_existing() = testing::MeasuredJob("busy", 12 * kGiB, 95);
  *request.mutable_candidate() = testing::MeasuredJob("new", 6 * kGiB, 90);
  auto r = placement_->CheckPlacement(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gpu(), "a100-40gb-mig-3g.20gb");
  EXPECT_EQ(r->capacity_bytes(), 20091 * kMiB);
  EXPECT_TRUE(r->fits());
  EXPECT_EQ(r->headroom_bytes(), static_cast<int64_t>(20091 * kMiB - 18 * kGiB));
  ASSERT_EQ(r->jobs_size(), 2);
  EXPECT_FALSE(r->jobs(0).candidate());
  EXPECT_TRUE(r->jobs(1).candidate());
  // Two jobs near saturation: Lucid's bad pairing.
  EXPECT_EQ(r->verdict(), v1::CONTENTION_VERDICT_BAD);
  EXPECT_LT(r->worst_predicted_speed(), 0.85);
  EXPECT_GT(r->jobs(1).confidence(), 0);
  // The other slices' jobs are said not to contend, not predicted.
  bool says_isolated = false;
  for (const std::string& reason : r->reasons())
    says_isolated |=
        absl::StrContains(reason, "MIG slice: jobs on the GPU's other slices");
  EXPECT_TRUE(says_isolated);
  // A whole GPU says no such thing.
  request.mutable_gpu()->set_catalog_id("a100-40gb");
  auto whole = placement_->CheckPlacement(request);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (const std::string& reason : whole->reasons())
    EXPECT_FALSE(absl::StrContains(reason, "MIG slice")) << reason;
}

// Jobs are packed by their requirement; beside others, a job with cuDNN benchmark
// mode's transient fits only if it is capped, and the response says so and how.
TEST_F(PlacementEngineTest, AJobWithATransientBesideOthersFitsOnlyWithACap) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("a100-80gb");
  *request.mutable_candidate()->mutable_description() =
      testing::ExampleRequest("cnn.json");  // Convolutions; benchmark not recorded.
  request.mutable_candidate()->set_name("cnn");
  auto alone = placement_->CheckPlacement(request);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_TRUE(alone->needs_cap().empty());  // Alone, the transient takes nobody's memory.

  *request.add_existing() = testing::MeasuredJob("light", 4 * kGiB, 10);
  auto beside = placement_->CheckPlacement(request);
  ASSERT_TRUE(beside.ok()) << beside.status();
  ASSERT_TRUE(beside->fits());
  EXPECT_EQ(beside->candidate_bytes(), alone->candidate_bytes());  // The requirement.
  ASSERT_EQ(beside->needs_cap_size(), 1);
  EXPECT_EQ(beside->needs_cap(0), "cnn");
  bool said = false;
  for (const std::string& reason : beside->reasons()) {
    said |= absl::StrContains(reason, "safe only with a cap: 'cnn'") &&
            absl::StrContains(reason, "set_per_process_memory_fraction(0.");
  }
  EXPECT_TRUE(said) << absl::StrJoin(beside->reasons(), "\n");

  request.mutable_candidate()
      ->mutable_description()
      ->mutable_model()
      ->set_cudnn_benchmark(false);
  auto off = placement_->CheckPlacement(request);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_TRUE(off->needs_cap().empty());

  v1::RankGpusRequest rank;
  *rank.mutable_job()->mutable_description() = testing::ExampleRequest("cnn.json");
  auto ranked = placement_->RankGpus(rank);
  ASSERT_TRUE(ranked.ok()) << ranked.status();
  ASSERT_GT(ranked->gpus_size(), 0);
  EXPECT_TRUE(ranked->gpus(0).needs_cap());
}

TEST_F(PlacementEngineTest, ADescribedCandidateUsesGpuestsOwnUtilizationEstimate) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("a100-80gb");
  *request.add_existing() = testing::MeasuredJob("light", 4 * kGiB, 10);
  *request.mutable_candidate()->mutable_description() =
      testing::ExampleRequest("cnn.json");
  auto r = placement_->CheckPlacement(request);
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::JobOutcome& c = r->jobs(1);
  EXPECT_EQ(c.utilization_source(), v1::UTILIZATION_SOURCE_ESTIMATE);
  EXPECT_LE(c.gpu_util_low(), c.gpu_util());
  EXPECT_GE(c.gpu_util_high(), c.gpu_util());
  // Lower than the measured neighbour's judgement would be with both measured.
  EXPECT_LT(c.confidence(), placement_->contention().interval_coverage);
  EXPECT_EQ(r->candidate_bytes(), c.memory_bytes());
  EXPECT_GT(c.memory_bytes(), 0u);
}

TEST_F(PlacementEngineTest, NodeReportedMemoryIsNotCountedTwice) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->mutable_node_reported()->set_total_bytes(24 * kGiB);
  request.mutable_gpu()->mutable_node_reported()->set_free_bytes(14 * kGiB);
  *request.add_existing() = testing::MeasuredJob("running", 10 * kGiB, 40);
  *request.mutable_candidate() = testing::MeasuredJob("next", 15 * kGiB, 40);
  auto r = placement_->CheckPlacement(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->gpu(), "node-reported");
  EXPECT_EQ(r->used_bytes(), 10 * kGiB);
  EXPECT_FALSE(r->fits());
  EXPECT_EQ(r->headroom_bytes(), -static_cast<int64_t>(kGiB));
}

// The extender judges each GPU with JudgeReportedGpu's arithmetic alone: over a grid of
// GPU states (empty, part used, nearly full; busy, idle, not said) and candidates (light
// and heavy, small and large), it says what CheckPlacement says for that GPU.
TEST_F(PlacementEngineTest, TheArithmeticPerGpuAgreesWithCheckPlacement) {
  const ContentionModel& contention = placement_->contention();
  for (const uint64_t free : {80 * kGiB, 50 * kGiB, 3 * kGiB}) {
    for (const double util : {-1.0, 5.0, 95.0}) {
      for (const double candidate_util : {0.1, 0.9}) {
        for (const uint64_t candidate_bytes : {2 * kGiB, 40 * kGiB}) {
          v1::CheckPlacementRequest check;
          v1::NodeReportedGpu* gpu = check.mutable_gpu()->mutable_node_reported();
          gpu->set_total_bytes(80 * kGiB);
          gpu->set_free_bytes(free);
          gpu->set_model("h100-80gb");
          if (free < 80 * kGiB) {
            v1::PlacementJob* running = check.add_existing();
            running->set_name("what runs on the GPU");
            if (util >= 0) {
              *running =
                  testing::MeasuredJob("what runs on the GPU", 80 * kGiB - free, util);
            } else {
              running->mutable_estimate()->set_peak_bytes(80 * kGiB - free);
            }
          }
          *check.mutable_candidate() =
              testing::MeasuredJob("pod", candidate_bytes, 100 * candidate_util);
          auto full = placement_->CheckPlacement(check);
          ASSERT_TRUE(full.ok()) << full.status();
          const GpuJudgement j = JudgeReportedGpu(
              contention, candidate_bytes, MeasuredByNvidiaSmi(100 * candidate_util),
              80 * kGiB, free,
              util >= 0 ? MeasuredByNvidiaSmi(util) : UnknownUtilization());
          SCOPED_TRACE(absl::StrCat("free ", free / kGiB, " GiB, util ", util,
                                    ", candidate ", candidate_bytes / kGiB, " GiB at ",
                                    candidate_util));
          EXPECT_EQ(j.fit.fits, full->fits());
          EXPECT_EQ(j.fit.used_bytes, full->used_bytes());
          EXPECT_EQ(j.fit.capacity_bytes, full->capacity_bytes());
          EXPECT_EQ(j.fit.headroom_bytes, full->headroom_bytes());
          EXPECT_EQ(j.contention.verdict, full->verdict());
          EXPECT_DOUBLE_EQ(j.contention.worst_speed, full->worst_predicted_speed());
          // The words of a fit are CheckPlacement's.
          const std::string reasons = absl::StrJoin(full->reasons(), "\n");
          EXPECT_TRUE(absl::StrContains(reasons, MemoryFitWords(j.fit))) << reasons;
        }
      }
    }
  }
}

TEST_F(PlacementEngineTest, BadInputNamesTheField) {
  const std::vector<
      std::pair<std::function<void(v1::CheckPlacementRequest&)>, std::string>>
      cases = {
          {[](v1::CheckPlacementRequest& r) { r.mutable_gpu()->set_catalog_id("b200"); },
           "gpu.catalog_id"},
          {[](v1::CheckPlacementRequest& r) {
             r.mutable_existing(0)->mutable_measured()->set_gpu_util(140);
           },
           "existing[0].measured.gpu_util"},
          {[](v1::CheckPlacementRequest& r) {
             r.mutable_candidate()->mutable_measured()->set_source(
                 v1::UTILIZATION_SOURCE_ESTIMATE);
           },
           "candidate.measured.source"},
          {[](v1::CheckPlacementRequest& r) { r.clear_candidate(); }, "candidate"},
          {[](v1::CheckPlacementRequest& r) {
             r.mutable_gpu()->mutable_node_reported()->set_total_bytes(kGiB);
             r.mutable_gpu()->mutable_node_reported()->set_free_bytes(2 * kGiB);
           },
           "gpu.node_reported.free_bytes"},
          // Estimated for the GPU it is placed on: another GPU named is refused, not
          // silently replaced.
          {[](v1::CheckPlacementRequest& r) {
             *r.mutable_candidate()->mutable_description() =
                 testing::ExampleRequest("cnn.json");
             r.mutable_candidate()->mutable_description()->set_gpu("h100-80gb");
           },
           "candidate.description.gpu"},
          // Reasons and outcomes name jobs: two of one name would read as one.
          {[](v1::CheckPlacementRequest& r) { r.mutable_candidate()->set_name("a"); },
           "candidate.name"},
          // 256 jobs of 60 KB names took 4.47 GB and 45 s of CPU: names are bounded.
          {[](v1::CheckPlacementRequest& r) {
             r.mutable_existing(0)->set_name(std::string(kMaxJobNameBytes + 1, 'n'));
           },
           "existing[0].name: 321 bytes"},
          // 8,000 existing jobs grew the server to 1.1 GB (each reason lists the
          // others); 16,000 aborted it.
          {[](v1::CheckPlacementRequest& r) {
             for (int i = 0; i < kMaxExistingJobs; ++i) {
               *r.add_existing() = testing::MeasuredJob(absl::StrCat("x", i), kGiB, 1);
             }
           },
           "existing:"},
      };
  for (const auto& [mutate, field] : cases) {
    v1::CheckPlacementRequest request;
    request.mutable_gpu()->set_catalog_id("a100-40gb");
    *request.add_existing() = testing::MeasuredJob("a", kGiB, 50);
    *request.mutable_candidate() = testing::MeasuredJob("b", kGiB, 50);
    mutate(request);
    auto r = placement_->CheckPlacement(request);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_TRUE(absl::StartsWith(r.status().message(), field))
        << field << ": " << r.status().message();
  }
}

// Each job's reason names its busiest neighbours and counts the rest: the response
// grows with the jobs (it named every other job: 171 KB at 100 jobs, 872 KB at 256).
TEST_F(PlacementEngineTest, TheResponseGrowsLinearlyWithTheJobs) {
  // Jobs named by `name_bytes`-byte names.
  auto size_with = [](int jobs, size_t name_bytes) {
    v1::CheckPlacementRequest request;
    request.mutable_gpu()->set_catalog_id("h200");
    for (int i = 0; i < jobs; ++i) {
      std::string name = absl::StrCat("job-", i);
      name.resize(std::max(name.size(), name_bytes), '-');
      *request.add_existing() = testing::MeasuredJob(name, 100 * kMiB, 1 + i % 90);
    }
    *request.mutable_candidate() = testing::MeasuredJob("new", kGiB, 50);
    auto r = placement_->CheckPlacement(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->ByteSizeLong() : 0;
  };
  for (const size_t name_bytes : {size_t{8}, size_t{64}, kMaxJobNameBytes}) {
    SCOPED_TRACE(absl::StrCat(name_bytes, "-byte names"));
    const size_t ten = size_with(10, name_bytes);
    const size_t most = size_with(kMaxExistingJobs, name_bytes);
    if (name_bytes <= 64) {
      EXPECT_LE(most, 100u << 10);
    }
    EXPECT_LT(static_cast<double>(most) / ten, 2.0 * (kMaxExistingJobs + 1) / 11);
  }
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("h200");
  for (int i = 0; i < 5; ++i) {
    *request.add_existing() = testing::MeasuredJob(absl::StrCat("j", i), kGiB, 10 + i);
  }
  *request.mutable_candidate() = testing::MeasuredJob("new", kGiB, 50);
  auto r = placement_->CheckPlacement(request);
  ASSERT_TRUE(r.ok());
  bool said = false;
  for (const std::string& reason : r->reasons()) {
    if (absl::StartsWith(reason, "'new'")) {
      said = absl::StrContains(reason, "beside 'j4', 'j3', 'j2' and 2 more jobs");
      EXPECT_TRUE(said) << reason;
    }
  }
  EXPECT_TRUE(said);
}

TEST_F(PlacementEngineTest, ADescriptionNamingTheTargetGpuIsAccepted) {
  v1::CheckPlacementRequest request;
  request.mutable_gpu()->set_catalog_id("a100-40gb");
  *request.mutable_candidate()->mutable_description() =
      testing::ExampleRequest("cnn.json");
  request.mutable_candidate()->mutable_description()->set_gpu("NVIDIA A100-SXM4-40GB");
  auto r = placement_->CheckPlacement(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->candidate_bytes(), 0u);
}

TEST_F(PlacementEngineTest, RanksEveryCatalogGpuAndMigProfile) {
  v1::RankGpusRequest request;
  *request.mutable_job() = testing::MeasuredJob("job", 15 * kGiB, 50);
  auto r = placement_->RankGpus(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(static_cast<size_t>(r->gpus_size()),
            engine_->registry()->gpus().All().size());
  int mig = 0;
  bool seen_not_fitting = false;
  for (const v1::GpuRanking& g : r->gpus()) {
    mig += g.mig();
    EXPECT_EQ(g.fits(), g.headroom_bytes() >= 0) << g.gpu();
    // Fitting GPUs first, tightest first.
    if (!g.fits()) seen_not_fitting = true;
    EXPECT_FALSE(seen_not_fitting && g.fits()) << g.gpu();
  }
  EXPECT_GE(mig, 14);                 // A100 40GB, A100 80GB and H100 profiles.
  EXPECT_EQ(r->gpus(0).gpu(), "t4");  // 15 GiB: the 15 GiB T4 is the tightest fit.
  EXPECT_TRUE(r->gpus(0).fits());
}

namespace field_bounds {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

bool IsNumber(const FieldDescriptor& f) {
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
    case FieldDescriptor::CPPTYPE_DOUBLE:
    case FieldDescriptor::CPPTYPE_FLOAT:
      return true;
    default:
      return false;
  }
}

void NumericFields(const Descriptor& d, std::set<std::string>& seen,
                   std::vector<std::string>& out) {
  if (!seen.insert(d.full_name()).second) return;
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    if (IsNumber(f)) out.push_back(f.full_name());
    if (f.message_type() != nullptr) NumericFields(*f.message_type(), seen, out);
  }
}

// Sets the row's field, in the first message of its type in m (depth first over the
// fields that are set), to value; false when m holds none.
bool SetField(Message& m, const std::string& field, double value) {
  const Descriptor& d = *m.GetDescriptor();
  const Reflection& r = *m.GetReflection();
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    if (f.full_name() == field) {
      if (f.is_repeated() && r.FieldSize(m, &f) == 0) return false;
      switch (f.cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          f.is_repeated() ? r.SetRepeatedInt32(&m, &f, 0, static_cast<int32_t>(value))
                          : r.SetInt32(&m, &f, static_cast<int32_t>(value));
          return true;
        case FieldDescriptor::CPPTYPE_INT64:
          f.is_repeated() ? r.SetRepeatedInt64(&m, &f, 0, static_cast<int64_t>(value))
                          : r.SetInt64(&m, &f, static_cast<int64_t>(value));
          return true;
        case FieldDescriptor::CPPTYPE_UINT32:
          f.is_repeated() ? r.SetRepeatedUInt32(&m, &f, 0, static_cast<uint32_t>(value))
                          : r.SetUInt32(&m, &f, static_cast<uint32_t>(value));
          return true;
        case FieldDescriptor::CPPTYPE_UINT64:
          f.is_repeated() ? r.SetRepeatedUInt64(&m, &f, 0, static_cast<uint64_t>(value))
                          : r.SetUInt64(&m, &f, static_cast<uint64_t>(value));
          return true;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          f.is_repeated() ? r.SetRepeatedDouble(&m, &f, 0, value)
                          : r.SetDouble(&m, &f, value);
          return true;
        default:
          return false;
      }
    }
  }
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    if (f.message_type() == nullptr) continue;
    if (f.is_repeated()) {
      for (int k = 0; k < r.FieldSize(m, &f); ++k) {
        if (SetField(*r.MutableRepeatedMessage(&m, &f, k), field, value)) return true;
      }
    } else if (r.HasField(m, &f) && SetField(*r.MutableMessage(&m, &f), field, value)) {
      return true;
    }
  }
  return false;
}

bool IsUnsigned(const std::string& field) {
  const FieldDescriptor* f =
      google::protobuf::DescriptorPool::generated_pool()->FindFieldByName(field);
  return f != nullptr && (f->cpp_type() == FieldDescriptor::CPPTYPE_UINT32 ||
                          f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64);
}

}  // namespace field_bounds

// Every number a client can send has a row in the one table (field_bounds.h): a field
// added to a request message without one fails here.
TEST(FieldBoundsTest, EveryNumericFieldOfEveryRequestHasARow) {
  std::set<std::string> seen;
  std::vector<std::string> fields;
  for (const auto* root :
       {v1::EstimateRequest::descriptor(), v1::CheckPlacementRequest::descriptor(),
        v1::RankGpusRequest::descriptor()}) {
    field_bounds::NumericFields(*root, seen, fields);
  }
  ASSERT_GT(fields.size(), 20u);
  for (const std::string& field : fields) {
    EXPECT_NE(FindFieldBound(field), nullptr) << field << " has no row in field_bounds.h";
  }
  for (const FieldBound& row : AllFieldBounds()) {
    EXPECT_NE(std::find(fields.begin(), fields.end(), row.field), fields.end())
        << row.field << ": a row for no request field";
  }
}

// Each row is enforced where the field is read: every field set just past its bounds,
// in a request that is otherwise valid, is refused by the table's check. (A layer's
// input_activations of -1 or 2^63-1 was answered as a smaller job that fits.)
TEST_F(PlacementEngineTest, EveryRowIsEnforcedOnEveryPath) {
  v1::CheckPlacementRequest with_model;
  with_model.mutable_gpu()->set_catalog_id("a100-40gb");
  *with_model.add_existing() = testing::MeasuredJob("measured", kGiB, 50);
  v1::PlacementJob* estimated = with_model.add_existing();
  estimated->set_name("estimated");
  estimated->mutable_estimate()->set_peak_bytes(kGiB);
  v1::UtilizationEstimate* u = estimated->mutable_estimate()->mutable_utilization();
  u->set_metric(v1::UTILIZATION_METRIC_GRACT);
  for (double e : {0.0, 0.5, 1.0}) u->add_bin_edges(e);
  u->add_probabilities(0.5);
  u->add_probabilities(0.5);
  u->set_predicted_class(1);
  u->set_confidence(0.5);
  v1::EstimateRequest description = testing::ExampleRequest("resnet50.json");
  v1::ModelDescription* m = description.mutable_model();
  ASSERT_TRUE(m->has_trace());
  m->set_sequence_length(1);
  m->mutable_stack()->set_cuda_major(13);
  m->mutable_stack()->set_module_loading("LAZY");
  m->mutable_allocator()->set_max_split_size_mb(512);
  m->mutable_parallelism()->set_data_parallel(1);
  m->mutable_parallelism()->set_tensor_parallel(1);
  m->mutable_parallelism()->set_largest_unit_bytes(kMiB);
  for (v1::Layer& layer : *m->mutable_layers()) {
    if (layer.input_activations() == 0) layer.set_input_activations(1);
  }
  *with_model.mutable_candidate()->mutable_description() = description;

  v1::CheckPlacementRequest with_features;
  with_features.mutable_gpu()->mutable_node_reported()->set_total_bytes(80 * kGiB);
  with_features.mutable_gpu()->mutable_node_reported()->set_free_bytes(60 * kGiB);
  v1::FeatureVector* f =
      with_features.mutable_candidate()->mutable_description()->mutable_features();
  f->set_family(v1::MODEL_FAMILY_CNN);
  f->set_batch_size(32);
  f->set_total_parameters(1000000);
  f->set_total_activations(1000000);
  f->set_depth(10);
  f->set_sequence_length(1);
  (*f->mutable_layer_counts())["Conv2d"] = 5;
  for (const v1::CheckPlacementRequest* base : {&with_model, &with_features}) {
    auto ok = placement_->CheckPlacement(*base);
    ASSERT_TRUE(ok.ok()) << ok.status();
  }

  const ValidationLimits limits;
  for (const FieldBound& row : AllFieldBounds()) {
    const double max = UpperBound(row, limits);
    std::vector<double> outside = {max < 1e6 ? max + 1 : max * 2};
    if (row.min > 0 || !field_bounds::IsUnsigned(row.field))
      outside.push_back(row.min - 1);
    for (double value : outside) {
      bool set = false;
      for (const v1::CheckPlacementRequest* base : {&with_model, &with_features}) {
        v1::CheckPlacementRequest request = *base;
        if (!field_bounds::SetField(request, row.field, value)) continue;
        set = true;
        auto r = placement_->CheckPlacement(request);
        EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
            << row.field << " = " << value;
        EXPECT_TRUE(absl::StrContains(r.status().message(), "must be within"))
            << row.field << " = " << value << ": " << r.status();
      }
      EXPECT_TRUE(set) << row.field << ": no base request holds it";
    }
  }
}
}  // namespace
}  // namespace gpuest
