// estimators/gpumemnet/networks: the probe a member is checked with at load reaches
// every part of its network (every token type, blocks of 8 and a remainder), and the
// probe's logits are the module's forward on it.
#include "estimators/gpumemnet/networks.h"

#include <torch/torch.h>

#include <set>

#include "gtest/gtest.h"

namespace gpuest::gpumemnet {
namespace {

NetworkConfig Config(NetworkKind kind) {
  NetworkConfig config;
  config.kind = kind;
  config.global_features = 7;
  config.head_classes = {5, 2};
  config.hidden = {12};
  config.vocabulary = 11;
  config.d_model = 8;
  config.attention_heads = 2;
  config.encoder_layers = 1;
  config.feedforward = 16;
  return config;
}

TEST(Networks, TheProbeReachesEveryPartOfTheNetwork) {
  const ProbeInput mlp = MakeProbeInput(Config(NetworkKind::kMlp));
  EXPECT_EQ(mlp.global.size(), 7u);
  EXPECT_TRUE(mlp.sequence.types.empty());
  const ProbeInput transformer = MakeProbeInput(Config(NetworkKind::kTransformer));
  EXPECT_EQ(transformer.global, mlp.global);
  const size_t n = transformer.sequence.types.size();
  EXPECT_GT(n % 8, 0u);  // Whole blocks of 8 and a remainder.
  EXPECT_GE(n, 16u);
  EXPECT_EQ(transformer.sequence.numbers.size(), 2 * n);
  const std::set<int64_t> types(transformer.sequence.types.begin(),
                                transformer.sequence.types.end());
  EXPECT_EQ(types.size(), 11u);  // Every type, the unknown one (0) included.
  EXPECT_EQ(*types.begin(), 0);
  EXPECT_EQ(*types.rbegin(), 10);
}

TEST(Networks, TheProbesLogitsAreTheModulesForward) {
  for (NetworkKind kind : {NetworkKind::kMlp, NetworkKind::kTransformer}) {
    torch::manual_seed(3);
    GpuMemNet net(Config(kind));
    net->eval();
    EXPECT_EQ(net->config().global_features, 7);
    const ProbeInput probe = MakeProbeInput(net->config());
    const std::vector<float> logits = ProbeLogits(net, probe);
    ASSERT_EQ(logits.size(), 7u);  // 5 + 2 classes.
    torch::NoGradGuard no_grad;
    const torch::Tensor global = torch::tensor(probe.global).reshape({1, 7});
    torch::Tensor want;
    if (kind == NetworkKind::kMlp) {
      want = net->forward(global);
    } else {
      const int64_t n = static_cast<int64_t>(probe.sequence.types.size());
      want = net->forward(global, torch::tensor(probe.sequence.types).reshape({1, n}),
                          torch::tensor(probe.sequence.numbers).reshape({1, n, 2}),
                          torch::zeros({1, n}, torch::kBool));
    }
    for (int k = 0; k < 7; ++k) {
      EXPECT_FLOAT_EQ(logits[k], want[0][k].item<float>()) << k;
    }
  }
}

}  // namespace
}  // namespace gpuest::gpumemnet
