// integrations/kubernetes/admission_review: the AdmissionReview kube-apiserver POSTs,
// read for a pod (its name, annotations and containers' limits) or a ResourceClaim
// (its device requests), refusals naming the field; and the review that answers it.
#include "integrations/kubernetes/admission_review.h"

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace gpuest::kubernetes {
namespace {

// body with the padding room ParseAdmissionReview wants.
absl::StatusOr<AdmissionPod> Parse(std::string body) {
  body.reserve(body.size() + kAdmissionBodyPadding);
  return ParseAdmissionReview(body);
}

std::string Review(const std::string& request) {
  return R"({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
             "request": )" +
         request + "}";
}

TEST(AdmissionReview, APodsNameAnnotationsAndLimitsAreRead) {
  auto pod = Parse(Review(R"({"uid": "u-1", "operation": "CREATE", "dryRun": true,
      "kind": {"group": "", "version": "v1", "kind": "Pod"},
      "object": {"metadata": {"namespace": "ml", "generateName": "train-",
          "annotations": {"gpuest.io/model": "resnet50", "replicas": "2"}},
        "spec": {"containers": [
          {"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1,
              "memory": "8Gi"}}},
          {"name": "sidecar"}]}}})"));
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->uid, "u-1");
  EXPECT_EQ(pod->operation, "CREATE");
  EXPECT_EQ(pod->kind, "Pod");
  EXPECT_TRUE(pod->dry_run);
  EXPECT_EQ(pod->pod, "ml/train-*");
  EXPECT_TRUE(pod->has_annotations);
  EXPECT_EQ(pod->annotations.at("gpuest.io/model"), "resnet50");
  ASSERT_EQ(pod->containers.size(), 2u);
  EXPECT_EQ(pod->containers[0].name, "main");
  EXPECT_TRUE(pod->containers[0].has_limits);
  EXPECT_EQ(pod->containers[0].limits.at("nvidia.com/gpu"), "1");
  EXPECT_EQ(pod->containers[0].limits.at("memory"), "8Gi");
  EXPECT_FALSE(pod->containers[1].has_resources);
  EXPECT_TRUE(pod->claim_requests.empty());
}

TEST(AdmissionReview, AClaimsDeviceRequestsAreRead) {
  auto claim = Parse(Review(R"({"uid": "u-2", "operation": "CREATE",
      "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
      "object": {"metadata": {"name": "gpu", "namespace": "ml"},
        "spec": {"devices": {"requests": [
          {"name": "one", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
          {"name": "any", "firstAvailable": []}]}}}})"));
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->kind, "ResourceClaim");
  EXPECT_FALSE(claim->dry_run);
  EXPECT_TRUE(claim->has_metadata);
  EXPECT_FALSE(claim->has_annotations);
  ASSERT_EQ(claim->claim_requests.size(), 2u);
  EXPECT_EQ(claim->claim_requests[0].name, "one");
  EXPECT_TRUE(claim->claim_requests[0].exactly);
  EXPECT_EQ(claim->claim_requests[0].device_class, "gpu.nvidia.com");
  EXPECT_EQ(nlohmann::json::parse(claim->claim_requests[0].exactly_json),
            nlohmann::json::parse(R"({"deviceClassName": "gpu.nvidia.com"})"));
  EXPECT_EQ(claim->claim_requests[1].index, 1u);
  EXPECT_FALSE(claim->claim_requests[1].exactly);
}

TEST(AdmissionReview, WhatIsNotAReviewIsRefusedNamingTheField) {
  auto message = [](const std::string& body) {
    auto parsed = Parse(body);
    EXPECT_FALSE(parsed.ok()) << body;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << body;
    return std::string(parsed.status().message());
  };
  EXPECT_TRUE(absl::StartsWith(message("{"), "AdmissionReview: not JSON"));
  EXPECT_TRUE(absl::StartsWith(
      message(R"({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
                  "request": {"uid": "u"}})"),
      "AdmissionReview: apiVersion admission.k8s.io/v1 and kind AdmissionReview"));
  EXPECT_EQ(message(Review(R"({"operation": "CREATE"})")),
            "AdmissionReview.request.uid: missing or not a string");
  EXPECT_EQ(message(Review(R"({"uid": "u", "dryRun": "yes"})")),
            "AdmissionReview.request.dryRun: not a boolean");
  EXPECT_EQ(message(Review(R"({"uid": "u", "kind": {"kind": "Pod"},
                               "object": {"spec": {"containers": [7]}}})")),
            "AdmissionReview.request.object.spec.containers[0]: not an object");
  EXPECT_TRUE(absl::StrContains(
      message(Review(std::string(200, '[') + std::string(200, ']'))), "nested"));
}

TEST(AdmissionReview, TheAnswerCarriesThePatchOrTheRefusal) {
  AdmissionVerdict patched;
  patched.patch = R"([{"op": "add", "path": "/metadata/labels/x", "value": "y"}])";
  patched.warnings = {"sized by gpuest"};
  const nlohmann::json allowed =
      nlohmann::json::parse(AdmissionResponseText("u-1", patched));
  EXPECT_EQ(allowed["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(allowed["kind"], "AdmissionReview");
  EXPECT_EQ(allowed["response"]["uid"], "u-1");
  EXPECT_EQ(allowed["response"]["allowed"], true);
  EXPECT_EQ(allowed["response"]["patchType"], "JSONPatch");
  std::string patch;
  ASSERT_TRUE(
      absl::Base64Unescape(allowed["response"]["patch"].get<std::string>(), &patch));
  EXPECT_EQ(patch, *patched.patch);
  EXPECT_EQ(allowed["response"]["warnings"][0], "sized by gpuest");
  EXPECT_FALSE(allowed["response"].contains("status"));

  AdmissionVerdict refused;
  refused.allowed = false;
  refused.code = 400;
  refused.message = "too large";
  const nlohmann::json denied =
      nlohmann::json::parse(AdmissionResponseText("u-2", refused));
  EXPECT_EQ(denied["response"]["allowed"], false);
  EXPECT_EQ(denied["response"]["status"]["code"], 400);
  EXPECT_EQ(denied["response"]["status"]["message"], "too large");
  EXPECT_FALSE(denied["response"].contains("patch"));
  EXPECT_EQ(AdmissionErrorText("bad body"),
            R"({"error":"gpuest admission webhook: bad body"})");
}

}  // namespace
}  // namespace gpuest::kubernetes
