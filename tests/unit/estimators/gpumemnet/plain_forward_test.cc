// The plain CPU forward on small nets whose logits are worked out by hand. The shipped
// members are checked against their libtorch modules at load (plain_export.h).
#include "estimators/gpumemnet/plain_forward.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace gpuest::gpumemnet {
namespace {

// weight is [out][in], as torch stores it; DenseLayer wants it transposed.
DenseLayer Layer(int in, int out, std::vector<float> weight, std::vector<float> bias,
                 bool relu) {
  DenseLayer d;
  d.in = in;
  d.out = out;
  d.weight_t.resize(weight.size());
  for (int o = 0; o < out; ++o) {
    for (int i = 0; i < in; ++i) d.weight_t[i * out + o] = weight[o * in + i];
  }
  d.bias = std::move(bias);
  d.relu = relu;
  return d;
}

TEST(PlainForward, MlpBasedMember) {
  PlainNet net;
  // [1, -2] -> [1 - 2 + 0, 2 + 2 + 1] = [-1, 5] -> ReLU [0, 5] -> 0 * 3 + 5 * 0.5 - 1.
  net.trunk = {Layer(2, 2, {1, 1, 2, -1}, {0, 1}, true),
               Layer(2, 1, {3, 0.5f}, {-1}, false)};
  const std::vector<float> logits = PlainForward(net, {1, -2}, EncodedSequence{});
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_FLOAT_EQ(logits[0], 1.5f);
}

TEST(PlainForward, TransformerBasedMemberOnOneToken) {
  PlainNet net;
  net.d = 2;
  net.embedding = {0, 0};                                     // One type, embedded at 0.
  net.projection = Layer(2, 2, {1, 0, 0, 1}, {0, 0}, false);  // Token = its numbers.
  EncoderLayer e;
  e.heads = 1;
  e.feedforward = 2;
  // q and k are 0, v is the token: one token attends to itself alone, so the
  // attention's output is v = [1, 3].
  e.in_proj =
      Layer(2, 6, {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1}, {0, 0, 0, 0, 0, 0}, false);
  e.out_proj = Layer(2, 2, {1, 0, 0, 1}, {0, 0}, false);
  e.norm1_w = {1, 1};
  e.norm1_b = {0, 0};
  // x + attention = [2, 6] -> norm1 [-1, 1] -> ReLU(linear1) [0, 1] -> linear2 [0, 1]
  // -> x + that = [-1, 2] -> norm2 [-1, 1] * 2 + 1 = [-1, 3].
  e.linear1 = Layer(2, 2, {1, 0, 0, 1}, {0, 0}, true);
  e.linear2 = Layer(2, 2, {1, 0, 0, 1}, {0, 0}, false);
  e.norm2_w = {2, 2};
  e.norm2_b = {1, 1};
  net.layers = {e};
  // Pooled [-1, 3] with the global feature 5: -1 + 3 + 5 + 0.5.
  net.trunk = {Layer(3, 1, {1, 1, 1}, {0.5f}, false)};
  EncodedSequence seq;
  seq.types = {0};
  seq.numbers = {1, 3};
  const std::vector<float> logits = PlainForward(net, {5}, seq);
  ASSERT_EQ(logits.size(), 1u);
  EXPECT_NEAR(logits[0], 7.5f, 1e-4f);  // LayerNorm's eps moves it by ~1e-5.
}

// A NaN must reach the logits, as in libtorch, where the estimator refuses to make a
// class of it: a ReLU that turned it into 0 made finite, wrong logits.
TEST(PlainForward, ANanInputGivesNanLogitsInEveryKernel) {
  PlainNet net;
  net.trunk = {
      Layer(1, 8, std::vector<float>(8, 1.0f), std::vector<float>(8, 0.0f), true),
      Layer(8, 1, std::vector<float>(8, 1.0f), {0.5f}, false)};
  for (ForwardKernels kernels : SupportedForwardKernels()) {
    const std::vector<float> logits = PlainForward(
        net, {std::numeric_limits<float>::quiet_NaN()}, EncodedSequence{}, kernels);
    ASSERT_EQ(logits.size(), 1u);
    EXPECT_TRUE(std::isnan(logits[0])) << logits[0];
  }
}

}  // namespace
}  // namespace gpuest::gpumemnet
