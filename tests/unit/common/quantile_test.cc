#include "common/quantile.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "common/text_file.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuest::common {
namespace {

TEST(Quantile, IsTheNearestRank) {
  // 1..10 shuffled: the q-quantile is the ceil(10 q)-th smallest.
  const std::vector<double> values = {7, 3, 10, 1, 9, 2, 8, 5, 4, 6};
  EXPECT_EQ(Quantile(values, 0.5), 5);
  EXPECT_EQ(Quantile(values, 0.9), 9);
  EXPECT_EQ(Quantile(values, 0.95), 10);
  EXPECT_EQ(Quantile(values, 0.1), 1);
  EXPECT_EQ(Quantile(values, 0.11), 2);
  EXPECT_EQ(Quantile(values, 1.0 / 3), 4);
  EXPECT_EQ(Quantile(values, 0), 1);
  EXPECT_EQ(Quantile(values, 1), 10);
  // Out of [0, 1]: clamped.
  EXPECT_EQ(Quantile(values, -0.5), 1);
  EXPECT_EQ(Quantile(values, 1.5), 10);
  // An observed value, never one interpolated between two.
  EXPECT_EQ(Quantile({10, 20}, 0.5), 10);
  EXPECT_EQ(Quantile({10, 20}, 0.51), 20);
}

// The cases python/tests/test_stats.py checks against gpuest.stats.quantile too.
TEST(Quantile, AgreesWithPythonOnTheSharedCases) {
  auto text = ReadTextFile(std::string(GPUEST_TEST_DATA_DIR) + "/quantile_cases.json",
                           kMaxConfigFileBytes);
  ASSERT_TRUE(text.ok()) << text.status();
  const nlohmann::json cases = nlohmann::json::parse(*text)["cases"];
  ASSERT_GE(cases.size(), 10u);
  for (const nlohmann::json& c : cases) {
    EXPECT_EQ(Quantile(c["values"].get<std::vector<double>>(), c["q"].get<double>()),
              c["quantile"].get<double>())
        << c.dump();
  }
}

TEST(Quantile, SortedAndUnsortedAgree) {
  std::vector<double> values = {0.3, -2, 7.5, 7.5, 1e9, 0};
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  for (double q : {0.0, 0.2, 0.5, 0.66, 0.99, 1.0}) {
    EXPECT_EQ(Quantile(values, q), QuantileOfSorted(sorted, q)) << q;
  }
}

TEST(Quantile, NoValuesHaveNoQuantile) {
  EXPECT_TRUE(std::isnan(Quantile({}, 0.5)));
  EXPECT_TRUE(std::isnan(QuantileOfSorted({}, 0.5)));
}

// What callers rely on ("keeps 95 % of the rows safe", "99 % of the calls took at most
// this"): at least q n values are at or below the quantile, and no smaller observed
// value has that property.
TEST(Quantile, IsTheSmallestValueWithAtLeastQOfTheValuesAtOrBelowIt) {
  std::mt19937_64 random(7);
  std::uniform_int_distribution<int> size(1, 300);
  std::uniform_int_distribution<int> value(0, 50);  // Ties too.
  for (int round = 0; round < 200; ++round) {
    std::vector<double> values(size(random));
    for (double& v : values) v = value(random);
    for (double q : {0.01, 0.1, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999}) {
      const double x = Quantile(values, q);
      const double n = static_cast<double>(values.size());
      const auto at_or_below =
          std::count_if(values.begin(), values.end(), [&](double v) { return v <= x; });
      const auto below =
          std::count_if(values.begin(), values.end(), [&](double v) { return v < x; });
      ASSERT_GE(static_cast<double>(at_or_below), q * n) << q << " of " << n;
      ASSERT_LT(static_cast<double>(below), q * n) << q << " of " << n;
      ASSERT_NE(std::find(values.begin(), values.end(), x), values.end());
    }
  }
}

}  // namespace
}  // namespace gpuest::common
