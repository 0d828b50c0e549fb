// lab/calibration/simulations: the two simulation estimators the calibration fits
// (allocsim on the request's trace, analytic on a step built from the layers), and one
// described run replayed through each, as the served estimators replay it.
#include "lab/calibration/simulations.h"

#include "estimators/allocsim/layer_trace.h"
#include "estimators/allocsim/memory_model.h"
#include "gtest/gtest.h"
#include "tests/support/calibration_rows.h"

namespace gpuest::calibration {
namespace {

using test_rows::Card;
using test_rows::kMiB;

// A Linear layer of 64 MiB of outputs and 16 MiB of weights, traced as one 512 MiB
// allocation: the trace and the layers tell two different steps.
v1::ModelDescription Described() {
  v1::ModelDescription m;
  m.set_name("net");
  m.set_family(v1::MODEL_FAMILY_MLP);
  m.set_batch_size(1);
  m.add_input_shape(1024);
  v1::Layer& linear = *m.add_layers();
  linear.set_type("Linear");
  linear.set_output_activations(16 * kMiB);
  linear.set_parameters(4 * kMiB);
  m.mutable_trace()->add_size_bytes(512 * kMiB);
  m.mutable_trace()->add_alloc_at(0);
  m.mutable_trace()->add_free_at(1);
  m.mutable_trace()->add_category(v1::ALLOCATION_CATEGORY_ACTIVATION);
  return m;
}

TEST(Simulations, AllocsimReplaysTheTraceAndAnalyticTheLayers) {
  ASSERT_EQ(Simulations().size(), 2u);
  EXPECT_EQ(Simulations()[0].id, "allocsim");
  EXPECT_EQ(Simulations()[0].trace_source, allocsim::TraceSource::kRequest);
  EXPECT_EQ(Simulations()[1].id, "analytic");
  EXPECT_EQ(Simulations()[1].trace_source, allocsim::TraceSource::kLayers);
  const v1::ModelDescription m = Described();
  auto replay = ReplayEach(m, Card(), 2);
  ASSERT_TRUE(replay.ok()) << replay.status();
  ASSERT_EQ(replay->size(), 2u);
  auto trace = allocsim::SimulatePeak(m.trace(), Card(), {}, 2);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(replay->at("allocsim").peak_reserved_bytes, trace->peak_reserved_bytes);
  EXPECT_EQ(replay->at("allocsim").uncertain_bytes, 0u);
  const allocsim::LayerStep step = allocsim::StepFromLayers(m);
  auto layers = allocsim::SimulatePeak(step.trace, Card(), {}, 2);
  ASSERT_TRUE(layers.ok()) << layers.status();
  EXPECT_EQ(replay->at("analytic").peak_reserved_bytes, layers->peak_reserved_bytes);
  EXPECT_EQ(replay->at("analytic").uncertain_bytes, step.uncertain_bytes);
  EXPECT_NE(replay->at("analytic").peak_reserved_bytes,
            replay->at("allocsim").peak_reserved_bytes);
}

}  // namespace
}  // namespace gpuest::calibration
