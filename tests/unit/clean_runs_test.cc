// A GPU's own calibration from clean runs (training/calibration/clean_runs.h), on runs
// whose peaks follow a known rule.
#include "training/calibration/clean_runs.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "training/calibration/simulations.h"

namespace gpuest::calibration {
namespace {

constexpr uint64_t kMiB = 1 << 20;

GpuProfile Card() {
  GpuProfile gpu;
  gpu.id = "card";
  gpu.memory_bytes = 80000 * kMiB;
  gpu.context_bytes = 700 * kMiB;
  gpu.constants_calibrated = true;
  return gpu;
}

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

// Six architecture families, four runs each; each peak is the context plus 1.1 x the
// simulated reserved peak: the clean relation an own fit should find.
std::string RunsFile() {
  const std::string path =
      (std::filesystem::temp_directory_path() / "gpuest_clean_runs.jsonl").string();
  std::ofstream out(path);
  for (const char* family : {"aa", "bb", "cc", "dd", "ee", "ff"}) {
    for (int size : {100, 200, 400, 800}) {
      const v1::ModelDescription m = Cnn(absl::StrCat(family, size), size);
      const auto replay = ReplayEach(m, Card(), 2);
      const double simulated = replay->at("allocsim").peak_reserved_bytes / 1048576.0;
      out << absl::StrCat(R"({"fileName":")", m.name(), R"(","model":")", m.name(),
                          R"(","description":)", JsonOf(m), R"(,"maxMemoryMib":)",
                          700 + 1.1 * simulated,
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
  auto c = CalibrateOnCleanRuns(RunsFile(), Card(), 2, FitOptions{}, 0, Elsewhere(3.0));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->gpu, "card");
  EXPECT_EQ(c->context_mib, 700);
  const CleanRunsFamily& f = c->by_simulation.at("allocsim").at(0);
  EXPECT_EQ(f.family, "cnn");
  EXPECT_EQ(f.runs, 24);
  EXPECT_EQ(f.architecture_families, 6);
  // Out of family, the relation is found again: every run safe and tight.
  EXPECT_DOUBLE_EQ(f.upper.safe, 1.0);
  EXPECT_DOUBLE_EQ(f.upper.safe_and_tight, 1.0);
  EXPECT_LT(f.point.mape, 1.0);
  // The terms elsewhere (3 x the simulated peak) are safe and loose: the own fit serves.
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
  auto c = CalibrateOnCleanRuns(path, Card(), 2, FitOptions{}, 0, Elsewhere(3.0));
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "no completed run")) << c.status();
}

}  // namespace
}  // namespace gpuest::calibration
