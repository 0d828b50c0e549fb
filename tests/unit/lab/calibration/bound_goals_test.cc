// lab/calibration/bound_goals: the goal table's scoring of a bound on runs no fit saw.
#include "lab/calibration/bound_goals.h"

#include <vector>

#include "gtest/gtest.h"

namespace gpuest::calibration {
namespace {

// The goal table's scoring (bound_goals.h): safe is the bound at or above the peak
// divided by the allowance, an out-of-memory run is safe above the card, within 1.2x
// and the point's MAPE count the completed runs, and the missed runs are named, most
// missed first.
TEST(BoundGoals, ScoresRunsWithTheAllowanceAndTheCard) {
  const std::vector<GoalRun> runs = {
      {"tight", 1000, 1100, 1000, false},  // Safe, within 1.2x, exact point.
      {"loose", 1000, 1500, 1100, false},  // Safe, not within.
      {"short", 1000, 900, 900, false},    // Short, but within the 1.15 allowance.
      {"shorter", 1000, 800, 800, false},  // Short either way.
      {"oom", 0, 50000, 0, true},          // Above a 40,960 MiB card.
  };
  GoalRow plain = ScoreGoalRuns("p", runs, 1.0, 40960);
  EXPECT_EQ(plain.runs, 5);
  EXPECT_DOUBLE_EQ(plain.safe, 3.0 / 5);
  EXPECT_DOUBLE_EQ(plain.within, 1.0 / 4);
  EXPECT_NEAR(plain.point_mape, 100 * (0 + 0.1 + 0.1 + 0.2) / 4, 1e-9);
  EXPECT_EQ(plain.short_runs, "shorter (0.80x), short (0.90x)");
  GoalRow allowed = ScoreGoalRuns("a", runs, 1.15, 40960);
  EXPECT_DOUBLE_EQ(allowed.safe, 4.0 / 5);  // 900 >= 1000 / 1.15.
  EXPECT_DOUBLE_EQ(allowed.within, 2.0 / 4);
  GoalRow small_card = ScoreGoalRuns("c", runs, 1.0, 60000);
  EXPECT_DOUBLE_EQ(small_card.safe, 2.0 / 5);  // The OOM run's bound is below this card.
  allowed.safe_goal = 0.8;
  allowed.within_goal = 0.5;
  EXPECT_TRUE(allowed.met());
  allowed.mape_goal = 5;
  EXPECT_FALSE(allowed.met());
}

}  // namespace
}  // namespace gpuest::calibration
