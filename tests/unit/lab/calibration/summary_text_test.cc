#include "lab/calibration/summary_text.h"

#include "gtest/gtest.h"

namespace gpuest::calibration {
namespace {

TEST(SummaryText, ATorchsummaryTableReadsBackAsItsLayersWithoutNamesOrInputs) {
  v1::ModelDescription m;
  m.set_name("net");
  m.set_batch_size(32);
  m.set_optimizer(v1::OPTIMIZER_ADAM);
  m.set_family(v1::MODEL_FAMILY_CNN);
  m.add_input_shape(3);
  const struct {
    const char* type;
    int64_t outputs, parameters;
  } layers[] = {{"Conv2d", 64 * 112 * 112, 9408},
                {"BatchNormAct2d", 64 * 112 * 112, 128},
                {"Linear", 1000, 2049000}};
  for (const auto& l : layers) {
    v1::Layer* layer = m.add_layers();
    layer->set_type(l.type);
    layer->set_output_activations(l.outputs);
    layer->set_parameters(l.parameters);
    layer->set_name("body.x");
    layer->set_input_from(-2);
  }
  m.mutable_trace()->add_size_bytes(1);

  EXPECT_NE(RenderTorchsummary(m).find("Total params: 2,058,536"), std::string::npos);
  auto summarised = AsSummarised(m);
  ASSERT_TRUE(summarised.ok()) << summarised.status();
  ASSERT_EQ(summarised->layers_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const v1::Layer& l = summarised->layers(i);
    EXPECT_EQ(l.type(), layers[i].type);
    EXPECT_EQ(l.output_activations(), layers[i].outputs);
    EXPECT_EQ(l.parameters(), layers[i].parameters);
    EXPECT_FALSE(l.has_input_from());
    EXPECT_EQ(l.input_activations(), 0);
  }
  // The job's settings stay; the trace and the family do not.
  EXPECT_EQ(summarised->batch_size(), 32);
  EXPECT_EQ(summarised->optimizer(), v1::OPTIMIZER_ADAM);
  EXPECT_FALSE(summarised->has_trace());
  EXPECT_EQ(summarised->family(), v1::MODEL_FAMILY_UNSPECIFIED);
}

}  // namespace
}  // namespace gpuest::calibration
