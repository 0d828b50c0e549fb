// lab/calibration/layer_agreement: the layer rules' agreement with the trace.
#include "lab/calibration/layer_agreement.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::calibration {
namespace {

// The layer rules against the trace: the share of runs within the tolerance, of models
// with every run within, and the types the misses hold more often than the others.
TEST(LayerAgreement, CountsRunsModelsAndTheTypesOfTheMisses) {
  std::vector<LayerAgreementRun> runs = {
      {"cnn", "a", 100, 103, {"Conv2d", "ReLU"}},
      {"cnn", "a", 200, 192, {"Conv2d", "ReLU"}},
      {"cnn", "b", 100, 80, {"Conv2d", "LayerNorm"}},
      {"cnn", "b", 200, 201, {"Conv2d", "LayerNorm"}},
  };
  const std::string md = RenderLayerAgreement(runs, 0.05, 8);
  // 3 of 4 runs within 5 %; model a has every run within, b not: 1 of 2.
  EXPECT_TRUE(absl::StrContains(md, "| cnn | 4 | 0.750 | 2 | 0.500 |")) << md;
  // The one miss holds LayerNorm, which one of the three runs within holds: named.
  // Conv2d, held by every run, is not.
  EXPECT_TRUE(absl::StrContains(md, "| cnn | LayerNorm | 1 of 1 | 1 of 3 | 0.80 |"))
      << md;
  EXPECT_FALSE(absl::StrContains(md, "| cnn | Conv2d |")) << md;
}

}  // namespace
}  // namespace gpuest::calibration
