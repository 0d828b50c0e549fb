// lab/calibration/clean_runs: a GPU's own calibration from clean runs, fitted out of
// architecture group and served where it is safe and tighter than the terms elsewhere.
#include "lab/calibration/clean_runs.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "lab/calibration/simulations.h"
#include "tests/support/calibration_rows.h"

namespace gpuest::calibration {
namespace {

using test_rows::Card;
using test_rows::kMiB;

// A one-convolution CNN of `mib` MiB of activations, its traced step one allocation.
v1::ModelDescription Cnn(const std::string& name, int mib) {
  v1::ModelDescription m;
  m.set_name(name);
  m.set_family(v1::MODEL_FAMILY_CNN);
  m.set_batch_size(1);
  m.add_input_shape(3);
  v1::Layer& conv = *m.add_layers();
  conv.set_type("Conv2d");
  conv.set_output_activations(static_cast<int64_t>(mib) * kMiB / 4);
  conv.set_parameters(1000);
  conv.set_input_activations(3);
  m.mutable_trace()->add_size_bytes(static_cast<uint64_t>(mib) * kMiB);
  m.mutable_trace()->add_alloc_at(0);
  m.mutable_trace()->add_free_at(1);
  m.mutable_trace()->add_category(v1::ALLOCATION_CATEGORY_ACTIVATION);
  return m;
}

std::string JsonOf(const v1::ModelDescription& m) {
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(m, &json).ok());
  return json;
}

// Six architecture groups, four runs each; each peak is the context plus 1.1 x the
// simulated reserved peak: the clean relation an own fit should find.
std::string RunsFile(const std::vector<std::string>& groups = {"aa", "bb", "cc", "dd",
                                                               "ee", "ff"}) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "gpuest_clean_runs.jsonl").string();
  std::ofstream out(path);
  for (const std::string& group : groups) {
    for (int size : {100, 200, 400, 800}) {
      const v1::ModelDescription m = Cnn(absl::StrCat(group, size), size);
      const auto replay = ReplayEach(m, Card(), 2);
      const double simulated = replay->at("allocsim").peak_reserved_bytes / 1048576.0;
      out << absl::StrCat(R"({"fileName":")", m.name(), R"(","model":")", m.name(),
                          R"(","description":)", JsonOf(m), R"(,"maxMemoryMib":)",
                          1000 + 1.1 * simulated,
                          R"(,"status":"SUCCESSFUL","measuredStatus":"OK"})")
          << "\n";
    }
  }
  return path;
}

CalibratedTerms Elsewhere(double safe_factor) {
  allocsim::FamilyCalibration c;
  c.safe_factor = safe_factor;
  c.point_factor = 1.1;
  return {{"allocsim", {{"cnn", c}}}, {"analytic", {{"cnn", c}}}};
}

TEST(CleanRuns, AnOwnFitThatIsSafeAndTighterServesTheGpu) {
  auto c = CalibrateOnCleanRuns(RunsFile(), Card(), 2, FitOptions{}, 0, Elsewhere(4.0));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->gpu, "card");
  EXPECT_EQ(c->context_mib, 1000);
  const CleanRunsFamily& f = c->by_simulation.at("allocsim").at(0);
  EXPECT_EQ(f.family, "cnn");
  EXPECT_EQ(f.runs, 24);
  EXPECT_EQ(f.architecture_groups, 6);
  // Out of group, the relation is found again: every run safe and tight.
  EXPECT_DOUBLE_EQ(f.upper.safe, 1.0);
  EXPECT_DOUBLE_EQ(f.upper.safe_and_tight, 1.0);
  EXPECT_LT(f.point.mape, 1.0);
  // The terms elsewhere (4 x the simulated peak) are safe and loose: the own fit serves.
  EXPECT_DOUBLE_EQ(f.calibrated_upper.safe, 1.0);
  EXPECT_DOUBLE_EQ(f.calibrated_upper.safe_and_tight, 0.0);
  EXPECT_TRUE(f.served);
  const std::optional<allocsim::GpuTerms> terms = GpuTermsOf(*c, "allocsim", "test");
  ASSERT_TRUE(terms.has_value());
  EXPECT_EQ(terms->gpu, "card");
  ASSERT_EQ(terms->families.size(), 1u);
  EXPECT_EQ(terms->families[0].unseen_architectures->rows, 24);
  EXPECT_TRUE(absl::StrContains(RenderCleanRunsSection(*c, "a100-40gb", 0.95),
                                "| cnn | allocsim (own fit) | 24 | 6 |"));
  // Scoring the shipped models, the column says what this run's rule would choose.
  EXPECT_FALSE(absl::StrContains(RenderCleanRunsSection(*c, "a100-40gb", 0.95),
                                 "the terms served are the shipped ones"));
  EXPECT_TRUE(absl::StrContains(RenderCleanRunsSection(*c, "a100-40gb", 0.95, true),
                                "the terms served are the shipped ones"));
}

TEST(CleanRuns, TermsAsTightElsewhereKeepServing) {
  // 1.1 x the simulated peak elsewhere is as tight: the own fit is not served.
  auto c = CalibrateOnCleanRuns(RunsFile(), Card(), 2, FitOptions{}, 0, Elsewhere(1.1));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->by_simulation.at("allocsim").at(0).served);
  EXPECT_FALSE(GpuTermsOf(*c, "allocsim", "test").has_value());
}

TEST(CleanRuns, RefusesAFileWithoutRuns) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "gpuest_no_clean_runs.jsonl").string();
  std::ofstream(path) << "";
  auto c = CalibrateOnCleanRuns(path, Card(), 2, FitOptions{}, 0, Elsewhere(4.0));
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "no completed, traced runs"))
      << c.status();
  // Runs of one architecture group leave nothing out: refused the same way.
  auto one =
      CalibrateOnCleanRuns(RunsFile({"aa"}), Card(), 2, FitOptions{}, 0, Elsewhere(4.0));
  ASSERT_FALSE(one.ok());
  EXPECT_TRUE(absl::StrContains(one.status().message(), "two or more architecture"))
      << one.status();
}

}  // namespace
}  // namespace gpuest::calibration
