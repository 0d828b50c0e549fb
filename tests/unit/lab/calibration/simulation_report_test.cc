// lab/calibration/simulation_report: the accuracy report's simulation section (its
// tables, the out-of-memory line, the calibration's terms, and what --score-models
// changes) and its real-models section.
#include "lab/calibration/simulation_report.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::calibration {
namespace {

TEST(SimulationReport, RendersTheTablesAndTheOutOfMemoryLine) {
  SimulationReport report;
  report.split = "a test split";
  report.context_mib = 1431;
  report.steps = 2;
  report.safe_quantile = 0.95;
  report.card_mib = 40960;
  FamilyReport& cnn = report.families.emplace_back();
  cnn.family = "cnn";
  cnn.oom_rows = 3;
  EstimatorScores& allocsim = cnn.estimators.emplace_back();
  allocsim.id = "allocsim";
  allocsim.upper = Score({{100, 100}, {120, 100}, {121, 100}, {99, 100}});
  allocsim.point = Score({{103, 100}});
  allocsim.oom_above_card = 3;
  EstimatorScores& horus = cnn.estimators.emplace_back();
  horus.id = "horus";
  horus.upper = Score({{200, 100}});
  horus.oom_above_card = 1;
  allocsim::FamilyCalibration terms;
  terms.intercept_mib = 375;
  terms.safe_factor = 1.53456;
  terms.point_intercept_mib = 300;
  terms.point_factor = 1.1194;
  terms.conv_output_factor = 6.5;
  cnn.calibration.emplace_back("allocsim", terms);

  const std::string md = RenderSimulationSection(report);
  EXPECT_TRUE(absl::StartsWith(
      md, "## Memory from first principles: allocator simulation (accuracy)\n\n"))
      << md;
  EXPECT_TRUE(absl::StrContains(md, "Held-out rows: a test split, so every"));
  EXPECT_TRUE(absl::StrContains(md, "A100 context 1431 MiB"));
  EXPECT_TRUE(absl::StrContains(md, "k_safe keeping 95 % of the training rows safe"));
  EXPECT_TRUE(absl::StrContains(md, "measured <= estimate <= 1.2 x measured"));
  EXPECT_TRUE(absl::StrContains(
      md,
      "| cnn | allocsim | 4 | 10.5 % | 1 MiB | 21 MiB | 0.750 | 0.500 | 3.0 % |\n"
      "| cnn | horus | 1 | 100.0 % | 100 MiB | 100 MiB | 1.000 | 0.000 | - |\n"))
      << md;
  EXPECT_TRUE(absl::StrContains(
      md,
      "- cnn: 3 held-out rows crashed out of memory on the A100 40GB; above its 40960 "
      "MiB: allocsim 3, horus 1.\n"))
      << md;
  EXPECT_TRUE(absl::StrContains(
      md, "| allocsim | cnn | 375 MiB | 1.535 | 6.50 | 300 MiB | 1.119 |\n"))
      << md;
}

// --score-models: the report scores the shipped manifests, so it names that command and
// labels this run's calibration table as a comparison, not what is served.
TEST(SimulationReport, ScoringTheShippedModelsSaysSoAndLabelsThisRunsFits) {
  SimulationReport report;
  report.split = "a test split";
  FamilyReport& cnn = report.families.emplace_back();
  cnn.family = "cnn";
  cnn.calibration.emplace_back("allocsim", allocsim::FamilyCalibration{});
  const std::string written = RenderSimulationSection(report);
  EXPECT_TRUE(
      absl::StrContains(written, "gpuest-calibrate-memory --write-models --report"));
  EXPECT_TRUE(absl::StrContains(written, "\nThe calibration (training rows only):\n"));
  report.scored_shipped = true;
  const std::string scored = RenderSimulationSection(report);
  EXPECT_TRUE(
      absl::StrContains(scored, "gpuest-calibrate-memory --score-models --report"))
      << scored;
  EXPECT_FALSE(absl::StrContains(scored, "--write-models"));
  EXPECT_TRUE(absl::StrContains(
      scored, "This run's calibration (training rows only), for comparison: not served"));
  RealModelsReport real;
  real.scored_shipped = true;
  EXPECT_TRUE(absl::StrContains(RenderRealModelsSection(real),
                                "`allocsim`, `analytic`: the terms served, as shipped"));
}

TEST(RealModelsSection, ListsTheRowsHoldingATransientWithTheirCase) {
  RealModelsReport report;
  report.card_mib = 40960;
  TransientRows& t = report.transients["transformer"];
  t.rows = 2;
  t.safe["allocsim"] = 1;
  t.other_rows["allocsim"] = Score({{110, 100}, {90, 100}});
  t.other_rows_point["allocsim"] = Score({{100, 100}, {95, 100}});
  t.allocsim_unsafe.push_back({"mobilevitv2_200@8", 11847, 5513, {64, 8885, 3183}});
  const std::string md = RenderRealModelsSection(report);
  EXPECT_TRUE(absl::StrContains(
      md, "| transformer | 2 | 1 of 2 | 0.500 / 0.500 / 2.5 % (2 rows)"))
      << md;
  EXPECT_TRUE(
      absl::StrContains(md,
                        "| transformer | mobilevitv2_200@8 | 11847 MiB | 5513 MiB "
                        "| 8885 MiB | 3183 MiB (batch 64) |"))
      << md;
}

}  // namespace
}  // namespace gpuest::calibration
