// integrations/kubernetes/admission_webhook: AdmissionWebhook::Mutate called directly
// with the shipped models loaded as the server loads them, fed AdmissionReviews of
// kube-apiserver's shape. A sized pod's patch is compared byte for byte with what
// pod_patch.h writes for the engine's own estimate of the same job (the other path to
// the same patch: `gpuest pod-patch`), for each scheduler; a claim template's with what
// dra_claim.h writes for the PlacementEngine's ranking; and the failure policy's
// answers (refused naming the field, admitted unsized on request, an HTTP error for
// what is the server's fault). Over HTTPS, with the real server:
// tests/integration/admission_test.cc and tests/dra/.
#include "integrations/kubernetes/admission_webhook.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "integrations/kubernetes/admission_review.h"
#include "nlohmann/json.hpp"
#include "tests/support/examples.h"
#include "tests/support/server_process.h"
#include "tests/support/shipped_models.h"

namespace gpuest::kubernetes {
namespace {

using nlohmann::json;

constexpr char kGpu[] = "a100-80gb";
constexpr char kUid[] = "705ab4f5-6393-11e8-b7cc-42010a800002";

std::string CnnText() {
  return testing::ReadFileOrDie(std::string(GPUEST_EXAMPLES_DIR) + "/cnn.json");
}

// A pod as kubectl creates it: a sidecar without a GPU, then the trainer asking for one
// with the given limits.
json Pod(const json& annotations, json trainer_limits = {{"nvidia.com/gpu", "1"}}) {
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "train"}, {"namespace", "ml"}}},
      {"spec",
       {{"containers", json::array({{{"name", "sidecar"}, {"image", "busybox"}},
                                    {{"name", "trainer"},
                                     {"image", "pytorch"},
                                     {"resources", {{"limits", trainer_limits}}}}})}}}};
  if (!annotations.is_null()) pod["metadata"]["annotations"] = annotations;
  return pod;
}

json Described(json more_annotations = json::object()) {
  more_annotations["gpuest.io/description"] = CnnText();
  return Pod(more_annotations);
}

// The AdmissionReview kube-apiserver POSTs for object.
std::string Review(const json& object, const std::string& operation = "CREATE") {
  const std::string kind = object.value("kind", "");
  const std::string group = kind == "Pod" ? "" : "resource.k8s.io";
  return json{{"apiVersion", "admission.k8s.io/v1"},
              {"kind", "AdmissionReview"},
              {"request",
               {{"uid", kUid},
                {"kind", {{"group", group}, {"version", "v1"}, {"kind", kind}}},
                {"namespace", "ml"},
                {"operation", operation},
                {"userInfo", {{"username", "alice"}}},
                {"object", object},
                {"oldObject", operation == "UPDATE" ? object : json(nullptr)},
                {"dryRun", false}}}}
      .dump();
}

// The review's response, checked for the parts every answer has.
json Response(const common::HttpReply& reply) {
  EXPECT_EQ(reply.status, 200) << reply.body;
  const json review = json::parse(reply.body, nullptr, false);
  EXPECT_FALSE(review.is_discarded()) << reply.body;
  if (review.is_discarded()) return json();
  EXPECT_EQ(review["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(review["kind"], "AdmissionReview");
  EXPECT_EQ(review["response"]["uid"], kUid);
  return review["response"];
}

std::string PatchText(const json& response) {
  EXPECT_EQ(response.value("patchType", ""), "JSONPatch") << response.dump(2);
  std::string text;
  EXPECT_TRUE(absl::Base64Unescape(response.value("patch", ""), &text));
  return text;
}

class AdmissionWebhookTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models_ = new testing::FixedModels(testing::ShippedModelSet());
  }
  static void TearDownTestSuite() {
    delete models_;
    models_ = nullptr;
  }

  static AdmissionWebhook Webhook(SharingScheduler scheduler = SharingScheduler::kHami) {
    AdmissionOptions options;
    options.scheduler = scheduler;
    options.gpu = kGpu;
    return AdmissionWebhook(*models_, options);
  }

  // The engine's estimate of the pod's job on the webhook's GPU.
  static v1::EstimateResponse Estimate() {
    v1::EstimateRequest request = testing::ExampleRequest("cnn.json");
    request.set_gpu(kGpu);
    auto estimate =
        models_->Current()->engine().Estimate(request, common::WorkDeadline::Never());
    EXPECT_TRUE(estimate.ok()) << estimate.status();
    return estimate.ok() ? *estimate : v1::EstimateResponse();
  }

  // What pod_patch.h writes for the estimate, on the trainer (container 1) of Pod().
  static std::string ExpectedPatch(SharingScheduler scheduler,
                                   std::optional<uint64_t> existing = std::nullopt) {
    const v1::EstimateResponse estimate = Estimate();
    auto request = MemoryRequestFor(scheduler, estimate.recommendation().memory_bytes());
    EXPECT_TRUE(request.ok()) << request.status();
    if (!request.ok()) return "";
    PodShape shape;
    shape.container_index = 1;
    shape.existing_amount = existing;
    return PodPatchJson(*request, PodFiguresOf(estimate), shape);
  }

  static testing::FixedModels* models_;
};
testing::FixedModels* AdmissionWebhookTest::models_ = nullptr;

TEST_F(AdmissionWebhookTest, APodsPatchIsPodPatchsForTheEnginesEstimateForEachScheduler) {
  for (const auto& [name, scheduler] :
       std::vector<std::pair<std::string, SharingScheduler>>{
           {"hami", SharingScheduler::kHami},
           {"volcano", SharingScheduler::kVolcano},
           {"kai", SharingScheduler::kKai},
           {"alibaba", SharingScheduler::kAlibaba}}) {
    SCOPED_TRACE(name);
    const common::HttpReply reply =
        Webhook(scheduler).Mutate(Review(Described()), common::WorkDeadline::Never());
    EXPECT_EQ(reply.code, absl::StatusCode::kOk);
    const json response = Response(reply);
    EXPECT_EQ(response["allowed"], true);
    const std::string patch = PatchText(response);
    EXPECT_EQ(patch, ExpectedPatch(scheduler));

    // The patch applies to the pod, and the pod then carries the figures.
    const json patched = Described().patch(json::parse(patch));
    const PodFigures figures = PodFiguresOf(Estimate());
    EXPECT_EQ(patched["metadata"]["annotations"].value(kRequirementAnnotation, ""),
              std::to_string(figures.requirement_bytes));

    // A scheduler that does not enforce the figure says so, first among the warnings.
    auto request = MemoryRequestFor(scheduler, figures.requirement_bytes);
    ASSERT_TRUE(request.ok());
    const v1::MemoryCap& cap = Estimate().recommendation().cap();
    std::string note = EnforcementNote(scheduler, *request, cap.needed(),
                                       cap.per_process_memory_fraction());
    if (note.empty()) {
      for (const json& w : response.value("warnings", json::array())) {
        EXPECT_TRUE(absl::StartsWith(w.get<std::string>(), "gpuest: ")) << w;
      }
    } else {
      ASSERT_TRUE(response.contains("warnings")) << response.dump(2);
      const std::string first = response["warnings"][0];
      EXPECT_FALSE(first.empty());
      EXPECT_TRUE(absl::StartsWith(note, first)) << first << "\nvs\n" << note;
    }
  }
}

TEST_F(AdmissionWebhookTest, TheUsersOwnRequestIsKeptWhenLargerAndRaisedWhenSmaller) {
  for (const uint64_t mine : {uint64_t{1}, uint64_t{999999999}}) {
    SCOPED_TRACE(mine);
    json pod =
        Pod({{"gpuest.io/description", CnnText()}},
            {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", std::to_string(mine)}});
    const json response =
        Response(Webhook().Mutate(Review(pod), common::WorkDeadline::Never()));
    EXPECT_EQ(response["allowed"], true);
    EXPECT_EQ(PatchText(response), ExpectedPatch(SharingScheduler::kHami, mine));
  }
  // Not a whole number: refused naming the field.
  json pod = Pod({{"gpuest.io/description", CnnText()}},
                 {{"nvidia.com/gpu", "1"}, {"nvidia.com/gpumem", "lots"}});
  const common::HttpReply reply = Webhook().Mutate(Review(pod), {});
  EXPECT_EQ(reply.code, absl::StatusCode::kInvalidArgument);
  const json response = Response(reply);
  EXPECT_EQ(response["allowed"], false);
  EXPECT_EQ(response["status"]["code"], 400);
  EXPECT_TRUE(absl::StrContains(
      response["status"].value("message", ""),
      "spec.containers[1].resources.limits[nvidia.com/gpumem]: 'lots' is not a whole "
      "number of MiB"))
      << response.dump(2);
}

TEST_F(AdmissionWebhookTest, WithoutAGpuContainerTheRequestGoesOnTheFirstWithAWarning) {
  json pod = Described();
  pod["spec"]["containers"][1]["resources"]["limits"].erase("nvidia.com/gpu");
  const json response = Response(Webhook().Mutate(Review(pod), {}));
  EXPECT_EQ(response["allowed"], true);
  const v1::EstimateResponse estimate = Estimate();
  auto request =
      MemoryRequestFor(SharingScheduler::kHami, estimate.recommendation().memory_bytes());
  ASSERT_TRUE(request.ok());
  PodShape shape;  // The sidecar: no resources, no limits.
  shape.container_index = 0;
  shape.has_resources = false;
  shape.has_limits = false;
  EXPECT_EQ(PatchText(response), PodPatchJson(*request, PodFiguresOf(estimate), shape));
  ASSERT_TRUE(response.contains("warnings")) << response.dump(2);
  EXPECT_EQ(response["warnings"][0],
            "gpuest: no container of ml/train asks for nvidia.com/gpu; the memory "
            "request is set on sidecar");
}

TEST_F(AdmissionWebhookTest, WhatIsNotTheWebhooksIsAllowedUntouched) {
  const AdmissionWebhook webhook = Webhook();
  json config_map = {{"apiVersion", "v1"},
                     {"kind", "ConfigMap"},
                     {"metadata",
                      {{"name", "c"},
                       {"namespace", "ml"},
                       {"annotations", {{"gpuest.io/description", CnnText()}}}}}};
  const std::vector<std::pair<std::string, std::string>> reviews = {
      {"no annotation", Review(Pod(nullptr))},
      {"an UPDATE", Review(Described(), "UPDATE")},
      {"not a pod", Review(config_map)},
  };
  for (const auto& [what, review] : reviews) {
    SCOPED_TRACE(what);
    const common::HttpReply reply = webhook.Mutate(review, common::WorkDeadline::Never());
    EXPECT_EQ(reply.code, absl::StatusCode::kOk);
    const json response = Response(reply);
    EXPECT_EQ(response, json({{"uid", kUid}, {"allowed", true}}));
  }
}

TEST_F(AdmissionWebhookTest,
       ARefusedDescriptionIsRefusedNamingItOrAdmittedUnsizedOnRequest) {
  const AdmissionWebhook webhook = Webhook();
  const json bad = Pod({{"gpuest.io/description", R"({"batchSize": "many"})"}});
  const common::HttpReply refused_reply = webhook.Mutate(Review(bad), {});
  EXPECT_EQ(refused_reply.code, absl::StatusCode::kInvalidArgument);
  const json refused = Response(refused_reply);
  EXPECT_EQ(refused["allowed"], false);
  EXPECT_EQ(refused["status"]["code"], 400);
  const std::string message = refused["status"]["message"];
  const std::string prefix = "gpuest: pod ml/train: annotation gpuest.io/description";
  ASSERT_TRUE(absl::StartsWith(message, prefix)) << message;
  EXPECT_FALSE(refused.contains("patch"));

  // gpuest.io/on-error: allow: admitted, marked with the same reason.
  json allowed_pod = bad;
  allowed_pod["metadata"]["annotations"]["gpuest.io/on-error"] = "allow";
  const common::HttpReply admitted_reply = webhook.Mutate(Review(allowed_pod), {});
  EXPECT_EQ(admitted_reply.code, absl::StatusCode::kInvalidArgument);  // The outcome.
  const json admitted = Response(admitted_reply);
  EXPECT_EQ(admitted["allowed"], true);
  const std::string why = message.substr(std::string("gpuest: ").size());
  EXPECT_EQ(
      json::parse(PatchText(admitted)),
      json::parse(json::array({{{"op", "add"},
                                {"path", "/metadata/annotations/gpuest.io~1not-sized"},
                                {"value", why}}})
                      .dump()));
  ASSERT_TRUE(admitted.contains("warnings"));
  EXPECT_TRUE(absl::StartsWith(admitted["warnings"][0].get<std::string>(),
                               "gpuest: admitted unsized (gpuest.io/on-error: allow): "))
      << admitted.dump(2);

  // Neither allow nor refuse: refused naming the annotation.
  json odd = Described({{"gpuest.io/on-error", "maybe"}});
  const json odd_response = Response(webhook.Mutate(Review(odd), {}));
  EXPECT_EQ(odd_response["allowed"], false);
  EXPECT_EQ(odd_response["status"]["message"],
            "gpuest: pod ml/train: annotation gpuest.io/on-error: 'maybe' is neither "
            "allow nor refuse");
}

TEST_F(AdmissionWebhookTest, APassedDeadlineIsTheServersFaultForTheFailurePolicy) {
  const AdmissionWebhook webhook = Webhook();
  const common::WorkDeadline passed(absl::Now() - absl::Milliseconds(1));
  const common::HttpReply reply = webhook.Mutate(Review(Described()), passed);
  EXPECT_EQ(reply.status, 503) << reply.body;
  EXPECT_EQ(reply.code, absl::StatusCode::kDeadlineExceeded);
  const json body = json::parse(reply.body);
  EXPECT_TRUE(absl::StartsWith(body.value("error", ""),
                               "gpuest admission webhook: pod ml/train: annotation "
                               "gpuest.io/description: "))
      << reply.body;
  // A pod that asked to be admitted anyway is, unsized.
  const json admitted = Response(
      webhook.Mutate(Review(Described({{"gpuest.io/on-error", "allow"}})), passed));
  EXPECT_EQ(admitted["allowed"], true);
  EXPECT_TRUE(absl::StrContains(PatchText(admitted), "gpuest.io~1not-sized"));
}

TEST_F(AdmissionWebhookTest, ABodyThatIsNotAnAdmissionReviewIs400) {
  const AdmissionWebhook webhook = Webhook();
  for (const std::string& body :
       {std::string("not json"), std::string(R"({"kind": "AdmissionReview"})"),
        json{{"apiVersion", "admission.k8s.io/v1"},
             {"kind", "AdmissionReview"},
             {"request", {{"operation", "CREATE"}}}}
            .dump()}) {
    SCOPED_TRACE(body);
    const common::HttpReply reply = webhook.Mutate(body, {});
    EXPECT_EQ(reply.status, 400);
    EXPECT_EQ(reply.code, absl::StatusCode::kInvalidArgument);
    const json error = json::parse(reply.body, nullptr, false);
    ASSERT_TRUE(error.is_object()) << reply.body;
    EXPECT_TRUE(absl::StartsWith(error.value("error", ""), "gpuest admission webhook: "))
        << reply.body;
  }
}

TEST_F(AdmissionWebhookTest, AClaimTemplatesPatchIsDraClaimsForThePlacementsRanking) {
  const DraDeviceClass* cls = BuiltInDraClasses().Find("gpu.nvidia.com");
  ASSERT_NE(cls, nullptr);
  const std::string skeleton = ClaimTemplateSkeleton("gpu", CnnText(), *cls);
  json object = json::parse(skeleton);
  object["metadata"]["namespace"] = "ml";
  const json response = Response(Webhook().Mutate(Review(object), {}));
  EXPECT_EQ(response["allowed"], true) << response.dump(2);
  const json sized = object.patch(json::parse(PatchText(response)));

  // The other path: the PlacementEngine's ranking of the job, sized by dra_claim.h.
  v1::EstimateRequest job = testing::ExampleRequest("cnn.json");
  auto ranking = models_->Current()->placement().RankGpus(RankRequestFor(job, {cls}));
  ASSERT_TRUE(ranking.ok()) << ranking.status();
  auto sizing = SizeClaim(*ranking, *cls, "", "test");
  ASSERT_TRUE(sizing.ok()) << sizing.status();
  ASSERT_FALSE(sizing->alternatives.empty());
  auto expected = ClaimTemplateJson("gpu", CnnText(), *cls, *sizing);
  ASSERT_TRUE(expected.ok()) << expected.status();
  json want = json::parse(*expected);
  want["metadata"]["namespace"] = "ml";
  EXPECT_EQ(sized, want) << sized.dump(2) << "\nvs\n" << want.dump(2);
}

}  // namespace
}  // namespace gpuest::kubernetes
