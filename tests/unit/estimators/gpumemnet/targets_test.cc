// estimators/gpumemnet/targets: what the heads predict, memory in GiB bins with the
// open top class and utilization in classes over edges, read back strictly.
#include "estimators/gpumemnet/targets.h"

#include "gtest/gtest.h"
#include "tests/unit/estimators/gpumemnet/manifest_part.h"

namespace gpuest::gpumemnet {
namespace {

using manifest_part::Read;
using manifest_part::Refusal;

TEST(Targets, MemoryBinsAndTheTopClass) {
  const HeadSpec h = MemoryHead(8);
  EXPECT_EQ(h.classes(), 6);  // [0,8) ... [32,40), and > 40 GiB.
  EXPECT_EQ(h.MemoryClass(7.9 * common::kGiB, false), 0);
  EXPECT_EQ(h.MemoryClass(8.0 * common::kGiB, false), 1);
  EXPECT_EQ(h.MemoryClass(39.9 * common::kGiB, false), 4);
  EXPECT_EQ(h.MemoryClass(3.0 * common::kGiB, true),
            5);  // OOM: whatever the column says.
  EXPECT_EQ(MemoryHead(1).classes(), 41);
  auto back = Read<HeadSpec>(h.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->edges, h.edges);
  nlohmann::json bad = h.ToJson();
  bad["classes"] = 5;
  EXPECT_EQ(Refusal<HeadSpec>(bad), "m.json: 'classes' is 5, but the edges make 6");
  bad = h.ToJson();
  bad["width_gib"] = 4;
  EXPECT_EQ(Refusal<HeadSpec>(bad), "m.json: 'width_gib' does not match width_bytes");
  bad = h.ToJson();
  bad["target"] = "Memory";
  EXPECT_EQ(Refusal<HeadSpec>(bad),
            "m.json: 'target' must be \"memory\" or \"utilization\"");

  const HeadSpec u = UtilizationHead("SMACT", {0, 0.3, 0.9, 1}, "paper");
  EXPECT_EQ(u.classes(), 3);
  auto u_back = Read<HeadSpec>(u.ToJson());
  ASSERT_TRUE(u_back.ok()) << u_back.status();
  EXPECT_EQ(u_back->target, HeadTarget::kUtilization);
  EXPECT_EQ(u_back->metric, "SMACT");
  EXPECT_EQ(u.UtilizationClass(0.29), 0);
  EXPECT_EQ(u.UtilizationClass(0.3), 1);
  EXPECT_EQ(u.UtilizationClass(1.0), 2);
  EXPECT_EQ(u.UtilizationClass(-1), -1);  // Not measured.
}

}  // namespace
}  // namespace gpuest::gpumemnet
