// estimators/allocsim/population: a job's population is told by where its model came
// from (or the generator's configuration as its name), never assumed silently; and
// each population's terms say what they cover. (The estimator serving each its own
// terms: SimulationEstimator.ThePopulationNotTheOptimizerChoosesTheTerms.)
#include "estimators/allocsim/population.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::allocsim {
namespace {

v1::ModelDescription From(const char* source, const char* name = "net") {
  v1::ModelDescription m;
  m.set_model_source(source);
  m.set_name(name);
  m.set_optimizer(v1::OPTIMIZER_ADAM);
  return m;
}

TEST(Population, TheGeneratorsModelsAreSyntheticByTheirSource) {
  const PopulationChoice c = ChoosePopulation(From("gpuest.synthetic.cnn:Model"));
  EXPECT_EQ(c.population, Population::kSynthetic);
  EXPECT_FALSE(c.assumed);
  EXPECT_EQ(c.basis, "synthetic: GPUMemNet's generator (gpuest.synthetic.cnn:Model)");
}

TEST(Population, AnyOtherSourceIsRealAndANamedLibraryIsSaid) {
  PopulationChoice c = ChoosePopulation(From("timm.models.resnet:resnet50"));
  EXPECT_EQ(c.population, Population::kReal);
  EXPECT_FALSE(c.assumed);
  EXPECT_EQ(c.basis, "real: a named timm model (timm.models.resnet:resnet50)");
  c = ChoosePopulation(From("my_project.nets:Net", "input_size:3_arch:uniform"));
  EXPECT_EQ(c.population, Population::kReal);
  EXPECT_EQ(c.basis,
            "real: the job's own code (my_project.nets:Net), not GPUMemNet's generator");
  // "gpuest.synthetic" names the package, not a prefix of another one.
  EXPECT_EQ(ChoosePopulation(From("gpuest.synthetics:Net")).population,
            Population::kReal);
}

TEST(Population, WithoutASourceTheGeneratorsNameTellsElseRealIsAssumed) {
  const PopulationChoice named = ChoosePopulation(
      From("", "input_channels:3_num_classes:10_depth:4_arch:pyramid_batch:32"));
  EXPECT_EQ(named.population, Population::kSynthetic);
  EXPECT_FALSE(named.assumed);
  EXPECT_TRUE(absl::StrContains(named.basis, "named by GPUMemNet's generator's"));
  for (const char* name : {"resnet50", "input_channels:3", "arch:pyramid_input_x"}) {
    const PopulationChoice c = ChoosePopulation(From("", name));
    EXPECT_EQ(c.population, Population::kReal) << name;
    EXPECT_TRUE(c.assumed) << name;
    EXPECT_TRUE(absl::StartsWith(c.basis, "real, assumed:")) << c.basis;
  }
}

TEST(Population, EachPopulationsTermsSayWhatTheyCover) {
  const TermMechanisms synthetic = MechanismsOf(Population::kSynthetic, false);
  const TermMechanisms traced = MechanismsOf(Population::kReal, false);
  const TermMechanisms built = MechanismsOf(Population::kReal, true);
  EXPECT_EQ(synthetic.intercept, traced.intercept);
  EXPECT_TRUE(absl::StrContains(synthetic.factor, "GPUMemNet's generated networks"));
  EXPECT_TRUE(absl::StrContains(traced.factor, "fragmentation and block reuse"));
  EXPECT_EQ(traced.factor, built.factor);
  // A step built from the layers holds no workspace: the conv term covers them all.
  EXPECT_TRUE(absl::StrContains(built.conv_output, "does not hold"));
  EXPECT_TRUE(absl::StrContains(traced.conv_output, "larger than the traced"));
  EXPECT_EQ(MechanismsOf(Population::kSynthetic, true).conv_output,
            synthetic.conv_output);
}

}  // namespace
}  // namespace gpuest::allocsim
