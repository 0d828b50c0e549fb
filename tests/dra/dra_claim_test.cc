// integrations/kubernetes/dra_claim.h in-process: the requestPolicy's rounding as
// resource/v1 CapacityRequestPolicyRange and validValues state it, quantities, the
// table's refusals naming the field, and SizeClaim's choice of models.
#include "integrations/kubernetes/dra_claim.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "common/text_file.h"
#include "gtest/gtest.h"

namespace gpuest::kubernetes {
namespace {

constexpr uint64_t kMi = uint64_t{1} << 20;
constexpr uint64_t kGi = uint64_t{1} << 30;

TEST(DraQuantity, BytesAreReadAndWrittenExactly) {
  EXPECT_EQ(*ParseByteQuantity("10Gi", "f"), 10 * kGi);
  EXPECT_EQ(*ParseByteQuantity("512Mi", "f"), 512 * kMi);
  EXPECT_EQ(*ParseByteQuantity("2G", "f"), 2000000000u);
  EXPECT_EQ(*ParseByteQuantity("1048577", "f"), 1048577u);
  for (const char* bad : {"", "Gi", "1.5Gi", "100m", "-1Gi", "1e3", "99999999999999Ti"}) {
    const absl::StatusOr<uint64_t> q = ParseByteQuantity(bad, "request_policy.min");
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_TRUE(absl::StrContains(q.status().message(), "request_policy.min")) << bad;
  }
  EXPECT_EQ(ByteQuantityText(10 * kGi), "10Gi");
  EXPECT_EQ(ByteQuantityText(9638 * kMi), "9638Mi");
  EXPECT_EQ(ByteQuantityText(kGi + 1), "1073741825");
}

// CapacityRequestPolicyRange: below min rounds up to min; with step, up to min + n *
// step; past max, no device. validValues: the smallest not below the request.
TEST(DraRequestPolicy, RoundsAsTheSchedulerRounds) {
  DraRequestPolicy range;
  range.min_bytes = kGi;
  range.step_bytes = 512 * kMi;
  range.max_bytes = 4 * kGi;
  EXPECT_EQ(RoundedByPolicy(1, range), kGi);
  EXPECT_EQ(RoundedByPolicy(kGi, range), kGi);
  EXPECT_EQ(RoundedByPolicy(kGi + 1, range), kGi + 512 * kMi);
  EXPECT_EQ(RoundedByPolicy(2 * kGi, range), 2 * kGi);
  EXPECT_EQ(RoundedByPolicy(4 * kGi, range), 4 * kGi);
  EXPECT_EQ(RoundedByPolicy(4 * kGi + 1, range), std::nullopt);
  DraRequestPolicy no_step;
  no_step.min_bytes = kGi;
  EXPECT_EQ(RoundedByPolicy(kGi + 7, no_step), kGi + 7);
  DraRequestPolicy values;
  values.valid_values = {kGi, 4 * kGi, 10 * kGi};
  EXPECT_EQ(RoundedByPolicy(5, values), kGi);
  EXPECT_EQ(RoundedByPolicy(4 * kGi, values), 4 * kGi);
  EXPECT_EQ(RoundedByPolicy(4 * kGi + 1, values), 10 * kGi);
  EXPECT_EQ(RoundedByPolicy(10 * kGi + 1, values), std::nullopt);
}

TEST(DraClasses, TheBuiltInTableHasTheNvidiaDriversClasses) {
  const DraClasses& classes = BuiltInDraClasses();
  const DraDeviceClass* whole = classes.Find("gpu.nvidia.com");
  ASSERT_NE(whole, nullptr);
  EXPECT_FALSE(whole->shared);
  EXPECT_EQ(whole->product_attribute, "productName");
  const DraDeviceClass* mig = classes.Find("mig.nvidia.com");
  ASSERT_NE(mig, nullptr);
  EXPECT_TRUE(mig->mig);
  EXPECT_EQ(mig->profile_attribute, "profile");
  const DraDeviceClass* shared = classes.Find("gpu-shared.gpuest.io");
  ASSERT_NE(shared, nullptr);
  EXPECT_TRUE(shared->shared);
  EXPECT_EQ(shared->memory_capacity, "memory");
  EXPECT_TRUE(
      absl::StrContains(shared->cap_parameters, "defaultPinnedDeviceMemoryLimit"));
  EXPECT_EQ(classes.Find("example.com/nic"), nullptr);
}

TEST(DraClasses, ATableFileOverItsBoundIsRefusedUnread) {
  const std::string path =
      ::testing::TempDir() + "/dra_classes_" + std::to_string(getpid()) + ".json";
  std::ofstream(path) << "{}";
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(common::kMaxConfigFileBytes) + 1),
            0);
  const absl::StatusOr<DraClasses> classes = LoadDraClasses(path);
  EXPECT_EQ(classes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      absl::StrContains(classes.status().message(), "16777217 bytes, over the limit"))
      << classes.status();
  std::remove(path.c_str());
}

TEST(DraClasses, ABadTableIsRefusedNamingTheField) {
  struct Case {
    const char* text;
    const char* field;
  };
  for (const Case& c :
       std::vector<Case>{{"[]", "not a JSON object"},
                         {R"({"device_classes": [{"driver": "d", "devices": "whole_gpus",
                "product_attribute": "p"}]})",
                          "device_classes[0].device_class"},
                         {R"({"device_classes": [{"device_class": "c", "driver": "d",
                "devices": "gpus", "product_attribute": "p"}]})",
                          "device_classes[0].devices"},
                         {R"({"device_classes": [{"device_class": "c", "driver": "d",
                "devices": "mig_profiles", "product_attribute": "p"}]})",
                          "device_classes[0].profile_attribute"},
                         {R"({"device_classes": [{"device_class": "c", "driver": "d",
                "devices": "whole_gpus", "product_attribute": "p", "shared": true}]})",
                          "device_classes[0].memory_capacity"},
                         {R"({"device_classes": [{"device_class": "c", "driver": "d",
                "devices": "whole_gpus", "product_attribute": "p", "shared": true,
                "memory_capacity": "memory",
                "request_policy": {"validRange": {"min": "1Gi", "step": "0"}}}]})",
                          "device_classes[0].request_policy.validRange.step"},
                         {R"({"device_classes": [{"device_class": "c", "driver": "d",
                "devices": "whole_gpus", "product_attribute": "p", "shared": true,
                "memory_capacity": "memory",
                "request_policy": {"validValues": ["2Gi", "1Gi"]}}]})",
                          "device_classes[0].request_policy.validValues[1]"},
                         {R"({"device_classes": [{"device_class": "c", "driver": "d",
                "devices": "whole_gpus", "product_attribute": "p", "shared": true,
                "memory_capacity": "memory", "cap": {"limit": "4Gi"}}]})",
                          "device_classes[0].cap"},
                         {R"({"device_classes": [{"device_class": "c", "driver": "d",
                "devices": "whole_gpus", "product_attribute": "p", "gpus": [""]}]})",
                          "device_classes[0].gpus[0]"},
                         {R"({"device_classes": [{"device_class": "c", "driver": "d",
                "driver": "e", "devices": "whole_gpus", "product_attribute": "p"}]})",
                          "key \"driver\" appears twice in one object, at "
                          "device_classes[0]"},
                         {R"({"device_classes": [
                {"device_class": "c", "driver": "d", "devices": "whole_gpus",
                 "product_attribute": "p"},
                {"device_class": "c", "driver": "d", "devices": "whole_gpus",
                 "product_attribute": "p"}]})",
                          "device_classes[1].device_class"}}) {
    const absl::StatusOr<DraClasses> parsed = ParseDraClasses(c.text, "table.json");
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), c.field))
        << parsed.status() << " does not name " << c.field;
  }
}

v1::GpuRanking Ranked(const std::string& id, const std::string& name, bool fits,
                      uint64_t peak, uint64_t capacity, bool mig = false) {
  v1::GpuRanking r;
  r.set_gpu(id);
  r.set_name(name);
  r.set_fits(fits);
  r.set_peak_bytes(peak);
  r.set_capacity_bytes(capacity);
  r.set_mig(mig);
  return r;
}

TEST(SizeClaim, FittingModelsOfTheClassesKindInOrderWithTheirFigures) {
  v1::RankGpusResponse ranking;
  *ranking.add_gpus() = Ranked("l4", "NVIDIA L4", true, 5 * kGi + 1, 24 * kGi);
  *ranking.add_gpus() =
      Ranked("a100-40gb-mig-3g.20gb", "NVIDIA A100-SXM4-40GB MIG 3g.20gb", true, 5 * kGi,
             20 * kGi, true);
  v1::GpuRanking a100 =
      Ranked("a100-40gb", "NVIDIA A100-SXM4-40GB", true, 6 * kGi, 40 * kGi);
  a100.add_aliases("a100-pcie-40gb");
  a100.add_aliases("NVIDIA A100-PCIE-40GB");
  *ranking.add_gpus() = a100;
  *ranking.add_gpus() = Ranked("t4", "Tesla T4", false, 20 * kGi, 15 * kGi);
  const DraClasses& classes = BuiltInDraClasses();

  const absl::StatusOr<ClaimSizing> shared =
      SizeClaim(ranking, *classes.Find("gpu-shared.gpuest.io"), "", "claim");
  ASSERT_TRUE(shared.ok()) << shared.status();
  ASSERT_EQ(shared->alternatives.size(), 2u);
  EXPECT_EQ(shared->alternatives[0].gpu, "l4");
  EXPECT_EQ(shared->alternatives[0].request_bytes, 5 * kGi + kMi);  // Up to a MiB.
  EXPECT_EQ(shared->alternatives[1].selector,
            "device.attributes[\"gpu.nvidia.com\"].productName in "
            "[\"NVIDIA A100-SXM4-40GB\", \"NVIDIA A100-PCIE-40GB\"]");
  ASSERT_EQ(shared->left_out.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(shared->left_out[0], "t4 (needs 20.0 GiB"));

  const absl::StatusOr<ClaimSizing> mig =
      SizeClaim(ranking, *classes.Find("mig.nvidia.com"), "", "claim");
  ASSERT_TRUE(mig.ok()) << mig.status();
  ASSERT_EQ(mig->alternatives.size(), 1u);
  EXPECT_EQ(mig->alternatives[0].subrequest, "a100-40gb-mig-3g-20gb");
  EXPECT_EQ(
      mig->alternatives[0].selector,
      "device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA A100-SXM4-40GB\" "
      "&& device.attributes[\"gpu.nvidia.com\"].profile == \"3g.20gb\"");
  EXPECT_EQ(mig->alternatives[0].request_bytes, 0u);  // A whole device: selector alone.

  // One model named: that one; a model of another kind, or none that fits: refused.
  const absl::StatusOr<ClaimSizing> named = SizeClaim(
      ranking, *classes.Find("gpu.nvidia.com"), "NVIDIA A100-PCIE-40GB", "claim");
  ASSERT_TRUE(named.ok()) << named.status();
  ASSERT_EQ(named->alternatives.size(), 1u);
  EXPECT_EQ(named->alternatives[0].gpu, "a100-40gb");
  const absl::StatusOr<ClaimSizing> other = SizeClaim(
      ranking, *classes.Find("gpu.nvidia.com"), "a100-40gb-mig-3g.20gb", "claim");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(other.status().message(), "claim.gpu")) << other.status();
  const absl::StatusOr<ClaimSizing> none =
      SizeClaim(ranking, *classes.Find("gpu.nvidia.com"), "t4", "claim");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "t4 (needs")) << none.status();
}

}  // namespace
}  // namespace gpuest::kubernetes
