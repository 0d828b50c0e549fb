// estimators/gpumemnet/network_module: the GPUMemNet module of both kinds, built from
// a shape. The MLP-based kind is its dense layers with ReLU between them (what the
// plain forward copies); the Transformer-based kind pools only the layers that are
// there, so padding a row changes nothing.
#include "estimators/gpumemnet/network_module.h"

#include <torch/torch.h>

#include "gtest/gtest.h"

namespace gpuest::gpumemnet {
namespace {

NetworkShape Shape(NetworkKind kind) {
  NetworkShape shape;
  shape.kind = kind;
  shape.global_features = 5;
  shape.head_classes = {4, 3};
  shape.hidden = {16, 8};
  shape.vocabulary = 6;
  shape.d_model = 8;
  shape.attention_heads = 2;
  shape.encoder_layers = 1;
  shape.feedforward = 12;
  return shape;
}

TEST(NetworkModule, AnMlpIsItsDenseLayersWithReluBetween) {
  torch::manual_seed(1);
  GpuMemNetModule net(Shape(NetworkKind::kMlp));
  net->eval();
  const std::vector<torch::nn::Linear> dense = net->DenseLayers();
  ASSERT_EQ(dense.size(), 3u);  // Two trunk layers and the heads.
  EXPECT_EQ(dense[0]->weight.sizes(), (std::vector<int64_t>{16, 5}));
  EXPECT_EQ(dense[1]->weight.sizes(), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(dense[2]->weight.sizes(), (std::vector<int64_t>{7, 8}));  // 4 + 3 classes.
  torch::NoGradGuard no_grad;
  const torch::Tensor global = torch::randn({3, 5});
  torch::Tensor by_hand = global;
  for (size_t l = 0; l < dense.size(); ++l) {
    by_hand = torch::linear(by_hand, dense[l]->weight, dense[l]->bias);
    if (l + 1 < dense.size()) by_hand = torch::relu(by_hand);
  }
  const torch::Tensor logits = net->forward(global);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 7}));
  EXPECT_TRUE(torch::allclose(logits, by_hand, 1e-6, 1e-6));
}

TEST(NetworkModule, ATransformerPoolsOnlyTheLayersThatAreThere) {
  torch::manual_seed(2);
  GpuMemNetModule net(Shape(NetworkKind::kTransformer));
  net->eval();
  EXPECT_EQ(net->shape().vocabulary, 6);
  torch::NoGradGuard no_grad;
  const torch::Tensor global = torch::randn({1, 5});
  const torch::Tensor types = torch::tensor({1, 5, 2}, torch::kInt64).reshape({1, 3});
  const torch::Tensor numbers = torch::randn({1, 3, 2});
  const torch::Tensor alone =
      net->forward(global, types, numbers, torch::zeros({1, 3}, torch::kBool));
  EXPECT_EQ(alone.sizes(), (std::vector<int64_t>{1, 7}));
  // The same row padded by two positions of any content, masked.
  const torch::Tensor padded_types =
      torch::cat({types, torch::tensor({4, 0}, torch::kInt64).reshape({1, 2})}, 1);
  const torch::Tensor padded_numbers = torch::cat({numbers, torch::randn({1, 2, 2})}, 1);
  const torch::Tensor padding =
      torch::tensor({false, false, false, true, true}).reshape({1, 5});
  const torch::Tensor padded =
      net->forward(global, padded_types, padded_numbers, padding);
  EXPECT_TRUE(torch::allclose(alone, padded, 1e-5, 1e-5)) << alone << " vs " << padded;
  // Unmasked, the two positions are layers: another answer.
  const torch::Tensor unmasked = net->forward(global, padded_types, padded_numbers,
                                              torch::zeros({1, 5}, torch::kBool));
  EXPECT_FALSE(torch::allclose(alone, unmasked, 1e-5, 1e-5));
}

}  // namespace
}  // namespace gpuest::gpumemnet
