// lab/trainer/classification_scores: accuracy and macro-F1 over the measured rows,
// the standard deviation, and Wilson's interval.
#include "lab/trainer/classification_scores.h"

#include "gtest/gtest.h"

namespace gpuest::trainer {
namespace {

TEST(Metrics, AccuracyMacroF1AndIntervals) {
  const Scores s = Score({0, 0, 1, 1, -1}, {0, 1, 1, 1, 0});
  EXPECT_EQ(s.n, 4);
  EXPECT_DOUBLE_EQ(s.accuracy, 0.75);
  // Class 0: P 1, R 0.5, F1 2/3; class 1: P 2/3, R 1, F1 0.8.
  EXPECT_NEAR(s.macro_f1, (2.0 / 3 + 0.8) / 2, 1e-12);
  EXPECT_NEAR(StdDev({1, 2, 3}), 1.0, 1e-12);
  const auto ci = Wilson95(0.9, 100);
  EXPECT_NEAR(ci.first, 0.8256, 1e-3);
  EXPECT_NEAR(ci.second, 0.9448, 1e-3);
}

}  // namespace
}  // namespace gpuest::trainer
