#include "integrations/kubernetes/pod_patch.h"

#include "common/units.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuest::kubernetes {
namespace {

// The patch for container index, of a pod as PodShape's defaults have it.
std::string PatchFor(const MemoryRequest& r, int index) {
  PodShape shape;
  shape.container_index = index;
  return PodPatchJson(r, PodFigures{r.amount, r.amount, "v1"}, shape);
}

MemoryRequest RequestOrDie(SharingScheduler scheduler, uint64_t bytes) {
  absl::StatusOr<MemoryRequest> r = MemoryRequestFor(scheduler, bytes);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : MemoryRequest{};
}

TEST(PodPatch, HamiIsMiBInTheContainersLimits) {
  const MemoryRequest r = RequestOrDie(SharingScheduler::kHami, 12 * common::kGiB);
  EXPECT_EQ(r.key, "nvidia.com/gpumem");
  EXPECT_FALSE(r.annotation);
  EXPECT_EQ(r.amount, 12288u);
  EXPECT_EQ(r.unit, "MiB");
  const nlohmann::json patch = nlohmann::json::parse(PatchFor(r, 1));
  ASSERT_EQ(patch.size(), 5u);  // The request, then gpuest's four annotations.
  EXPECT_EQ(patch[0]["op"], "add");
  // RFC 6901: the '/' inside the resource name is escaped as ~1.
  EXPECT_EQ(patch[0]["path"], "/spec/containers/1/resources/limits/nvidia.com~1gpumem");
  EXPECT_EQ(patch[0]["value"], "12288");
}

TEST(PodPatch, MiBRoundsUpNeverDown) {
  // One byte over 1000 MiB asks for 1001 MiB; exactly 1000 MiB stays 1000.
  EXPECT_EQ(RequestOrDie(SharingScheduler::kHami, 1000 * common::kMiB + 1).amount, 1001u);
  EXPECT_EQ(RequestOrDie(SharingScheduler::kHami, 1000 * common::kMiB).amount, 1000u);
  EXPECT_EQ(RequestOrDie(SharingScheduler::kVolcano, 1000 * common::kMiB - 1).amount,
            1000u);
  EXPECT_EQ(RequestOrDie(SharingScheduler::kKai, 1).amount, 1u);
}

TEST(PodPatch, VolcanoIsMiBInTheContainersLimits) {
  const MemoryRequest r =
      RequestOrDie(SharingScheduler::kVolcano, 3 * common::kGiB + 5 * common::kMiB);
  EXPECT_EQ(r.key, "volcano.sh/gpu-memory");
  EXPECT_EQ(r.amount, 3077u);
  EXPECT_EQ(nlohmann::json::parse(PatchFor(r, 0))[0]["path"],
            "/spec/containers/0/resources/limits/volcano.sh~1gpu-memory");
}

TEST(PodPatch, KaiIsAnAnnotationInMiB) {
  const MemoryRequest r = RequestOrDie(SharingScheduler::kKai, 2 * common::kGiB);
  EXPECT_TRUE(r.annotation);
  EXPECT_EQ(r.amount, 2048u);
  const nlohmann::json patch = nlohmann::json::parse(PatchFor(r, 3));
  EXPECT_EQ(patch[0]["path"], "/metadata/annotations/gpu-memory");
  EXPECT_EQ(patch[0]["value"], "2048");
}

TEST(PodPatch, AlibabaIsWholeGiBRoundedUp) {
  EXPECT_EQ(RequestOrDie(SharingScheduler::kAlibaba, 7 * common::kGiB).amount, 7u);
  const MemoryRequest r = RequestOrDie(SharingScheduler::kAlibaba, 7 * common::kGiB + 1);
  EXPECT_EQ(r.amount, 8u);
  EXPECT_EQ(r.unit, "GiB");
  EXPECT_EQ(nlohmann::json::parse(PatchFor(r, 0))[0]["path"],
            "/spec/containers/0/resources/limits/aliyun.com~1gpu-mem");
  EXPECT_EQ(RequestOrDie(SharingScheduler::kAlibaba, 1).amount, 1u);
}

TEST(PodPatch, WritesTheFiguresAndWhatItDidAsAnnotations) {
  const MemoryRequest r = RequestOrDie(SharingScheduler::kHami, 12 * common::kGiB);
  const nlohmann::json patch = nlohmann::json::parse(PodPatchJson(
      r, PodFigures{12 * common::kGiB, 40 * common::kGiB, "abc123"}, PodShape{}));
  ASSERT_EQ(patch.size(), 5u);
  EXPECT_EQ(patch[1]["path"], "/metadata/annotations/gpuest.io~1requirement-bytes");
  EXPECT_EQ(patch[1]["value"], std::to_string(12 * common::kGiB));
  EXPECT_EQ(patch[2]["path"], "/metadata/annotations/gpuest.io~1uncapped-peak-bytes");
  EXPECT_EQ(patch[2]["value"], std::to_string(40 * common::kGiB));
  EXPECT_EQ(patch[3]["value"], "abc123");
  EXPECT_EQ(patch[4]["path"], "/metadata/annotations/gpuest.io~1memory-request");
  EXPECT_EQ(patch[4]["value"], "set 12288 MiB of nvidia.com/gpumem");
}

TEST(PodPatch, AddsTheParentsAPodLacks) {
  const MemoryRequest r = RequestOrDie(SharingScheduler::kVolcano, common::kGiB);
  PodShape shape;
  shape.container_index = 2;
  shape.has_annotations = false;
  shape.has_resources = false;
  nlohmann::json patch = nlohmann::json::parse(PodPatchJson(r, PodFigures{}, shape));
  EXPECT_EQ(patch[0]["path"], "/metadata/annotations");
  EXPECT_EQ(patch[0]["value"], nlohmann::json::object());
  EXPECT_EQ(patch[1]["path"], "/spec/containers/2/resources");
  EXPECT_EQ(patch[1]["value"], nlohmann::json({{"limits", nlohmann::json::object()}}));
  EXPECT_EQ(patch[2]["path"],
            "/spec/containers/2/resources/limits/volcano.sh~1gpu-memory");
  shape.has_annotations = true;
  shape.has_resources = true;
  shape.has_limits = false;
  patch = nlohmann::json::parse(PodPatchJson(r, PodFigures{}, shape));
  EXPECT_EQ(patch[0]["path"], "/spec/containers/2/resources/limits");
  EXPECT_EQ(patch[1]["path"],
            "/spec/containers/2/resources/limits/volcano.sh~1gpu-memory");
  // KAI's request is an annotation: the container's objects are not needed.
  const MemoryRequest kai = RequestOrDie(SharingScheduler::kKai, common::kGiB);
  patch = nlohmann::json::parse(PodPatchJson(kai, PodFigures{}, shape));
  EXPECT_EQ(patch[0]["path"], "/metadata/annotations/gpu-memory");
}

TEST(PodPatch, KeepsALargerRequestAndRaisesASmallerOne) {
  const MemoryRequest r =
      RequestOrDie(SharingScheduler::kHami, 10 * common::kGiB);  // 10240 MiB
  PodShape shape;
  shape.existing_amount = 10240;  // As large: kept, no operation on it.
  nlohmann::json patch = nlohmann::json::parse(PodPatchJson(r, PodFigures{}, shape));
  ASSERT_EQ(patch.size(), 3u);  // requirement, uncapped peak, what it did.
  EXPECT_EQ(
      patch.back()["value"],
      "kept the pod's 10240 MiB of nvidia.com/gpumem: not less than gpuest's 10240 MiB");
  shape.existing_amount = 8000;
  patch = nlohmann::json::parse(PodPatchJson(r, PodFigures{}, shape));
  EXPECT_EQ(patch[0]["op"], "replace");
  EXPECT_EQ(patch[0]["value"], "10240");
  EXPECT_EQ(patch.back()["value"],
            "raised the pod's 8000 MiB of nvidia.com/gpumem to gpuest's 10240 MiB");
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
