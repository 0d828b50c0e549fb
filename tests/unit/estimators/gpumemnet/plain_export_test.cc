// estimators/gpumemnet/plain_export: a member copied out of its module into the plain
// forward's form gives the module's logits, and a copy that does not is refused
// naming the logit.
#include "estimators/gpumemnet/plain_export.h"

#include <torch/torch.h>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace gpuest::gpumemnet {
namespace {

GpuMemNet Member(NetworkKind kind, double dropout) {
  NetworkConfig config;
  config.kind = kind;
  config.global_features = 6;
  config.head_classes = {4, 3};
  config.hidden = {32, 16};
  config.dropout = dropout;
  config.vocabulary = 5;
  config.d_model = 8;
  config.attention_heads = 2;
  config.encoder_layers = 2;
  config.feedforward = 16;
  return GpuMemNet(config);
}

TEST(PlainExport, AMembersCopyGivesTheModulesLogits) {
  for (NetworkKind kind : {NetworkKind::kMlp, NetworkKind::kTransformer}) {
    torch::manual_seed(4);
    GpuMemNet net = Member(kind, 0.1);
    net->eval();
    absl::StatusOr<PlainNet> plain = ExportPlainNet(net);
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_EQ(plain->trunk.size(), 3u);  // Two trunk layers and the heads.
    EXPECT_TRUE(plain->trunk[0].relu);
    EXPECT_FALSE(plain->trunk[2].relu);
    EXPECT_EQ(plain->trunk[2].out, 7);
    if (kind == NetworkKind::kMlp) {
      EXPECT_TRUE(plain->layers.empty());
      EXPECT_EQ(plain->trunk[0].in, 6);
    } else {
      EXPECT_EQ(plain->layers.size(), 2u);
      EXPECT_EQ(plain->embedding.size(), 5u * 8);
      EXPECT_EQ(plain->trunk[0].in, 8 + 6);  // Pooled tokens, then global features.
    }
    const ProbeInput probe = MakeProbeInput(net->config());
    const std::vector<float> want = ProbeLogits(net, probe);
    const std::vector<float> got = PlainForward(*plain, probe.global, probe.sequence);
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_NEAR(got[k], want[k], 1e-4 * (1 + std::abs(want[k]))) << k;
    }
  }
}

// A module left training drops half its units at random: its logits are not what the
// copy computes, and the export says which logit differs.
TEST(PlainExport, ACopyThatDisagreesWithTheModuleIsRefused) {
  torch::manual_seed(5);
  GpuMemNet net = Member(NetworkKind::kMlp, 0.5);
  net->train();
  const absl::StatusOr<PlainNet> plain = ExportPlainNet(net);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(plain.status().message(),
                               "plain forward disagrees with the module: logit "))
      << plain.status();
}

}  // namespace
}  // namespace gpuest::gpumemnet
