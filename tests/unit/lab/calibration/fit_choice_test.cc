// Which runs the real-model fits are made from and judged on, and which fit serves
// (lab/calibration/fit_choice.h).
#include "lab/calibration/fit_choice.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/calibration_rows.h"

namespace gpuest::calibration {
namespace {

using test_rows::Card;
using test_rows::kMiB;
using test_rows::Row;

const double kContextMib = static_cast<double>(Card().context_bytes) / kMiB;

RealRun RealRunOf(const std::string& group, double simulated_mib, double measured_mib,
                  bool oom = false, bool transient = false) {
  return {group, Row(simulated_mib, measured_mib), oom, transient};
}

TEST(OutOfGroupFitRows, GpuMemNetsRowsJoinAsOneGroupOnlyWhereTheirPopulationDoes) {
  const std::vector<CalibrationRow> synthetic = {Row(100, 1200), Row(200, 1300)};
  const std::vector<RealRun> real = {RealRunOf("resnet", 500, 1600),
                                     RealRunOf("vit", 700, 1800)};

  const std::vector<GroupedRow> joined = OutOfGroupFitRows("cnn", synthetic, true, real);
  ASSERT_EQ(joined.size(), 4u);
  EXPECT_EQ(joined[0].group, "gpumemnet-cnn");
  EXPECT_EQ(joined[1].group, "gpumemnet-cnn");
  EXPECT_EQ(joined[0].dataset, "gpumemnet");
  EXPECT_EQ(joined[2].group, "resnet");
  EXPECT_EQ(joined[3].group, "vit");
  EXPECT_EQ(joined[3].dataset, "real");

  // GPUMemNet's transformers are text classifiers; the real ones image models.
  const std::vector<GroupedRow> apart =
      OutOfGroupFitRows("transformer", synthetic, false, real);
  ASSERT_EQ(apart.size(), 2u);
  EXPECT_EQ(apart[0].group, "resnet");
  EXPECT_DOUBLE_EQ(apart[1].row.measured_mib, 1800);
}

TEST(OutOfGroupFitRows, RunsOutOfMemoryOrHoldingATransientArePredictedNotFitted) {
  const std::vector<RealRun> real = {RealRunOf("a", 500, 1600),
                                     RealRunOf("a", 500, 0, true),
                                     RealRunOf("b", 500, 9000, false, true)};
  const std::vector<GroupedRow> rows = OutOfGroupFitRows("cnn", {}, true, real);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(rows[0].measured);
  EXPECT_FALSE(rows[1].measured);
  EXPECT_FALSE(rows[2].measured);
}

TEST(OutOfGroupFitRows, ATransientDoesNotWidenEveryArchitectureGroupsBound) {
  // Five architecture groups whose peaks are context + 1.1 x the step, and one run in
  // five that also holds a search transient of 4,000 MiB. Fitted on, the transients
  // would set the margin; with their evidence they are predicted like any run, never
  // fitted on.
  std::vector<RealRun> real;
  for (const char* group : {"a", "b", "c", "d", "e"}) {
    for (int k = 1; k <= 5; ++k) {
      const double step = 1000.0 * k;
      const bool transient = k == 1;
      real.push_back(RealRunOf(group, step,
                               kContextMib + 1.1 * step + (transient ? 4000 : 0), false,
                               transient));
    }
  }
  std::vector<RealRun> unmarked = real;
  for (RealRun& r : unmarked) r.transient = false;
  FitOptions options;
  absl::StatusOr<OutOfGroupFit> marked_fit =
      FitOutOfGroup(OutOfGroupFitRows("cnn", {}, true, real), Card(), options);
  absl::StatusOr<OutOfGroupFit> unmarked_fit =
      FitOutOfGroup(OutOfGroupFitRows("cnn", {}, true, unmarked), Card(), options);
  ASSERT_TRUE(marked_fit.ok()) << marked_fit.status();
  ASSERT_TRUE(unmarked_fit.ok()) << unmarked_fit.status();

  const double card_mib = Card().memory_bytes / kMiB;
  const Shares marked = SharesOf(real, marked_fit->upper_mib, card_mib);
  const Shares widened = SharesOf(real, unmarked_fit->upper_mib, card_mib);
  EXPECT_DOUBLE_EQ(marked.safe, 1.0);
  EXPECT_DOUBLE_EQ(marked.safe_and_tight, 1.0);
  EXPECT_LT(widened.safe_and_tight, 0.5);  // 4,000 MiB over steps of 2,000 to 5,000.
}

TEST(Shares, AreJudgedWithoutTheRunsHoldingATransient) {
  const std::vector<RealRun> runs = {
      RealRunOf("a", 0, 1000),               // Upper 1,100: safe and tight.
      RealRunOf("a", 0, 1000),               // Upper 1,300: safe, loose.
      RealRunOf("a", 0, 5000, false, true),  // Unsafe, but a transient's.
      RealRunOf("b", 0, 0, true),            // Out of memory: 50,000 above the card.
      RealRunOf("b", 0, 0, true)};           // 30,000: below it.
  const Shares s = SharesOf(runs, {1100, 1300, 1200, 50000, 30000}, 40960);
  EXPECT_DOUBLE_EQ(s.safe, 1.0);
  EXPECT_DOUBLE_EQ(s.safe_and_tight, 0.5);
  EXPECT_EQ(s.oom_above_card, 1);
}

TEST(Shares, OfNoCompletedRunAreOne) {
  const Shares s = SharesOf({RealRunOf("a", 0, 900, false, true)}, {100}, 40960);
  EXPECT_DOUBLE_EQ(s.safe, 1.0);
  EXPECT_DOUBLE_EQ(s.safe_and_tight, 1.0);
}

TEST(CandidateServes, WhereTheIncumbentIsUnsafe) {
  EXPECT_TRUE(CandidateServes({0.90, 0.80, 5}, {0.92, 0.10, 0}, 0.95));
}

TEST(CandidateServes, WhereSafeEnoughAndTighter) {
  EXPECT_TRUE(CandidateServes({0.99, 0.50, 5}, {0.95, 0.60, 5}, 0.95));
  EXPECT_FALSE(CandidateServes({0.99, 0.50, 5}, {0.94, 0.90, 5}, 0.95));  // Unsafe.
  EXPECT_FALSE(CandidateServes({0.99, 0.50, 5}, {0.99, 0.50, 5}, 0.95));  // As tight.
}

TEST(CandidateServes, NeverLettingAnOutOfMemoryRunPassAsFitting) {
  EXPECT_FALSE(CandidateServes({0.99, 0.50, 5}, {0.99, 0.90, 4}, 0.95));
}

}  // namespace
}  // namespace gpuest::calibration
