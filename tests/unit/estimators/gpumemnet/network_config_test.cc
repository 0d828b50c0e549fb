// estimators/gpumemnet/network_config: a member's hyperparameters round-trip through
// the manifest, and nonsense is refused by the key.
#include "estimators/gpumemnet/network_config.h"

#include "gtest/gtest.h"
#include "tests/unit/estimators/gpumemnet/manifest_part.h"

namespace gpuest::gpumemnet {
namespace {

using manifest_part::Read;
using manifest_part::Refusal;

TEST(NetworkConfig, RoundTripsAndRejectsNonsense) {
  NetworkConfig c;
  c.kind = NetworkKind::kTransformer;
  c.global_features = 12;
  c.head_classes = {21, 11, 6};
  c.hidden = {128};
  c.vocabulary = 7;
  auto back = Read<NetworkConfig>(c.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), c.ToJson());
  EXPECT_EQ(back->kind, NetworkKind::kTransformer);
  EXPECT_EQ(back->total_classes(), 38);
  nlohmann::json bad = c.ToJson();
  bad["attention_heads"] = 5;  // 32 is not divisible by 5.
  EXPECT_EQ(Refusal<NetworkConfig>(bad), "m.json: holds inconsistent hyperparameters");
  bad = c.ToJson();
  bad["kind"] = "lstm";
  EXPECT_EQ(Refusal<NetworkConfig>(bad),
            "m.json: 'kind' must be \"mlp\" or \"transformer\"");
  bad = c.ToJson();
  bad["hidden"] = {128, -1.5};
  EXPECT_EQ(Refusal<NetworkConfig>(bad),
            "m.json: 'hidden' must be an array of the right type");
  // An MLP's config holds no encoder keys; one left in is a writer's mistake.
  bad = c.ToJson();
  bad["kind"] = "mlp";
  EXPECT_EQ(Refusal<NetworkConfig>(bad), "m.json: 'attention_heads' is not a known key");
}

}  // namespace
}  // namespace gpuest::gpumemnet
