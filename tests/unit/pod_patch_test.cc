#include "integrations/kubernetes/pod_patch.h"

#include "common/units.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuest::kubernetes {
namespace {

MemoryRequest RequestOrDie(SharingScheduler scheduler, uint64_t bytes) {
  absl::StatusOr<MemoryRequest> r = MemoryRequestFor(scheduler, bytes);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : MemoryRequest{};
}

TEST(PodPatch, HamiIsMiBInTheContainersLimits) {
  const MemoryRequest r = RequestOrDie(SharingScheduler::kHami, 12 * kGiB);
  EXPECT_EQ(r.key, "nvidia.com/gpumem");
  EXPECT_FALSE(r.annotation);
  EXPECT_EQ(r.amount, 12288u);
  EXPECT_EQ(r.unit, "MiB");
  const nlohmann::json patch = nlohmann::json::parse(PodPatchJson(r, 1));
  ASSERT_EQ(patch.size(), 1u);
  EXPECT_EQ(patch[0]["op"], "add");
  // RFC 6901: the '/' inside the resource name is escaped as ~1.
  EXPECT_EQ(patch[0]["path"], "/spec/containers/1/resources/limits/nvidia.com~1gpumem");
  EXPECT_EQ(patch[0]["value"], "12288");
}

TEST(PodPatch, MiBRoundsUpNeverDown) {
  // One byte over 1000 MiB asks for 1001 MiB; exactly 1000 MiB stays 1000.
  EXPECT_EQ(RequestOrDie(SharingScheduler::kHami, 1000 * kMiB + 1).amount, 1001u);
  EXPECT_EQ(RequestOrDie(SharingScheduler::kHami, 1000 * kMiB).amount, 1000u);
  EXPECT_EQ(RequestOrDie(SharingScheduler::kVolcano, 1000 * kMiB - 1).amount, 1000u);
  EXPECT_EQ(RequestOrDie(SharingScheduler::kKai, 1).amount, 1u);
}

TEST(PodPatch, VolcanoIsMiBInTheContainersLimits) {
  const MemoryRequest r = RequestOrDie(SharingScheduler::kVolcano, 3 * kGiB + 5 * kMiB);
  EXPECT_EQ(r.key, "volcano.sh/gpu-memory");
  EXPECT_EQ(r.amount, 3077u);
  EXPECT_EQ(nlohmann::json::parse(PodPatchJson(r, 0))[0]["path"],
            "/spec/containers/0/resources/limits/volcano.sh~1gpu-memory");
}

TEST(PodPatch, KaiIsAnAnnotationInMiB) {
  const MemoryRequest r = RequestOrDie(SharingScheduler::kKai, 2 * kGiB);
  EXPECT_TRUE(r.annotation);
  EXPECT_EQ(r.amount, 2048u);
  const nlohmann::json patch = nlohmann::json::parse(PodPatchJson(r, 3));
  EXPECT_EQ(patch[0]["path"], "/metadata/annotations/gpu-memory");
  EXPECT_EQ(patch[0]["value"], "2048");
}

TEST(PodPatch, AlibabaIsWholeGiBRoundedUp) {
  EXPECT_EQ(RequestOrDie(SharingScheduler::kAlibaba, 7 * kGiB).amount, 7u);
  const MemoryRequest r = RequestOrDie(SharingScheduler::kAlibaba, 7 * kGiB + 1);
  EXPECT_EQ(r.amount, 8u);
  EXPECT_EQ(r.unit, "GiB");
  EXPECT_EQ(nlohmann::json::parse(PodPatchJson(r, 0))[0]["path"],
            "/spec/containers/0/resources/limits/aliyun.com~1gpu-mem");
  EXPECT_EQ(RequestOrDie(SharingScheduler::kAlibaba, 1).amount, 1u);
}

TEST(PodPatch, RefusesAnUnknownSchedulerAndAZeroFigure) {
  absl::StatusOr<SharingScheduler> s = ParseSharingScheduler("yunikorn");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--scheduler"), absl::string_view::npos);
  EXPECT_EQ(*ParseSharingScheduler("alibaba"), SharingScheduler::kAlibaba);
  EXPECT_FALSE(MemoryRequestFor(SharingScheduler::kHami, 0).ok());
}

}  // namespace
}  // namespace gpuest::kubernetes
