// The shipped contention model (placement/contention_model.h): what it predicts for
// pairs and more, its file refused by key, and utilization read from an estimate.
#include "placement/contention_model.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/support/examples.h"

namespace gpuest::placement {
namespace {

const std::string kContentionFile = core::ContentionModelPath(GPUEST_MODELS_DIR);

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

}  // namespace
}  // namespace gpuest::placement
