#include "integrations/kubernetes/admission_webhook.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json_guard.h"
#include "estimators/core/gpu_profiles.h"
#include "integrations/kubernetes/admission_review.h"
#include "integrations/kubernetes/pod_description.h"
#include "nlohmann/json.hpp"

namespace gpuest::kubernetes {
namespace {

// Kubernetes shows each warning to the user (kubectl prints them); it asks for short
// ones and truncates long ones.
constexpr size_t kWarningBytes = 256;
constexpr size_t kMaxWarnings = 8;

// Whether a failure is the pod's (its description or its request), refused with its
// reason, or the server's (a deadline, an overload), left to the failurePolicy.
bool ThePodsFault(const absl::Status& status) {
  return status.code() == absl::StatusCode::kInvalidArgument ||
         status.code() == absl::StatusCode::kNotFound ||
         status.code() == absl::StatusCode::kFailedPrecondition ||
         status.code() == absl::StatusCode::kOutOfRange;
}

common::HttpReply Reply(const AdmissionPod& pod, const AdmissionVerdict& verdict,
                        absl::StatusCode code = absl::StatusCode::kOk) {
  return {200, AdmissionResponseText(pod.uid, verdict), code};
}

// The container the request goes on: the first that asks for nvidia.com/gpu, else the
// first (with a warning).
int GpuContainer(const AdmissionPod& pod, std::vector<std::string>& warnings) {
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    if (pod.containers[i].limits.count(kGpuResource) > 0) return static_cast<int>(i);
  }
  warnings.push_back(absl::StrCat("gpuest: no container of ", pod.pod, " asks for ",
                                  kGpuResource, "; the memory request is set on ",
                                  pod.containers.empty() ? "?" : pod.containers[0].name));
  return 0;
}

// The pod as the patch finds it at the request's key: which parents exist, and the
// user's own request in the request's unit. InvalidArgument naming the field for a
// request that is not a whole number.
absl::StatusOr<PodShape> ShapeOf(const AdmissionPod& pod, const MemoryRequest& request,
                                 int container) {
  PodShape shape;
  shape.container_index = container;
  shape.has_annotations = pod.has_annotations;
  const AdmissionContainer& c = pod.containers[static_cast<size_t>(container)];
  shape.has_resources = c.has_resources;
  shape.has_limits = c.has_limits;
  const std::map<std::string, std::string>& where =
      request.annotation ? pod.annotations : c.limits;
  const auto it = where.find(request.key);
  if (it == where.end()) return shape;
  uint64_t amount = 0;
  if (!absl::SimpleAtoi(it->second, &amount)) {
    const std::string field =
        request.annotation ? absl::StrCat("metadata.annotations[", request.key, "]")
                           : absl::StrCat("spec.containers[", container,
                                          "].resources.limits[", request.key, "]");
    return absl::InvalidArgumentError(absl::StrCat(
        "pod ", pod.pod, ": ", field, ": '", common::Utf8Prefix(it->second, 64),
        "' is not a whole number of ", request.unit));
  }
  shape.existing_amount = amount;
  return shape;
}

// Why a request of a configured class cannot become a firstAvailable list as it is
// (the API allows neither adminAccess nor a nested list in a subrequest), or is the
// user's to size; empty when gpuest sizes it.
std::string KeptAsIs(const AdmissionClaimRequest& r, const DraDeviceClass& cls) {
  const nlohmann::json exactly = nlohmann::json::parse(r.exactly_json, nullptr, false);
  if (!exactly.is_object()) return "its exactly is not an object";
  // Compared, never converted: a field of the wrong type is the API server's to refuse.
  if (exactly.contains("adminAccess") && exactly["adminAccess"] == true) {
    return "it asks for adminAccess, which a firstAvailable list cannot carry";
  }
  if (exactly.contains("allocationMode") && exactly["allocationMode"] == "All") {
    return "allocationMode All takes every matching device, of every model";
  }
  if (cls.shared && exactly.contains("capacity") && exactly["capacity"].is_object() &&
      exactly["capacity"].contains("requests") &&
      exactly["capacity"]["requests"].is_object() &&
      exactly["capacity"]["requests"].contains(cls.memory_capacity)) {
    return absl::StrCat("it asks for its own ", cls.memory_capacity, " capacity");
  }
  return "";
}

// The warnings an answer carries: the first kMaxWarnings, each cut to kWarningBytes.
void SetWarnings(const std::vector<std::string>& warnings, AdmissionVerdict& verdict) {
  for (const std::string& w : warnings) {
    if (verdict.warnings.size() == kMaxWarnings) break;
    verdict.warnings.push_back(common::Utf8Prefix(w, kWarningBytes));
  }
}

// The refusal of a gpuest.io/on-error that is neither allow nor refuse.
AdmissionVerdict OnErrorRefusal(const std::string& object, const std::string& value) {
  return AdmissionVerdict{
      false,
      std::nullopt,
      {},
      400,
      absl::StrCat("gpuest: ", object, ": annotation ", kOnErrorAnnotation, ": '",
                   common::Utf8Prefix(value, 64), "' is neither allow nor refuse")};
}

// A failure's answer: an object that asked (admit_unsized) is admitted unsized, with
// why; else the pod's fault is refused with its reason, and the server's is an HTTP
// error for the failurePolicy.
common::HttpReply FailedReply(const AdmissionPod& pod, bool admit_unsized,
                              const absl::Status& status) {
  const std::string why = std::string(status.message());
  if (admit_unsized) {
    AdmissionVerdict unsized;
    nlohmann::ordered_json patch = nlohmann::ordered_json::array();
    // Where the description was: a template's spec.metadata, or the object's own.
    const char* annotations = pod.kind == "ResourceClaimTemplate" && pod.has_annotations
                                  ? "/spec/metadata/annotations"
                                  : "/metadata/annotations";
    patch.push_back(
        {{"op", "add"},
         {"path", absl::StrCat(annotations, "/", JsonPointerToken(kNotSizedAnnotation))},
         {"value", common::Utf8Prefix(why, 1024)}});
    unsized.patch =
        patch.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
        "\n";
    unsized.warnings.push_back(common::Utf8Prefix(
        absl::StrCat("gpuest: admitted unsized (", kOnErrorAnnotation, ": allow): ", why),
        kWarningBytes));
    return Reply(pod, unsized, status.code());
  }
  if (!ThePodsFault(status)) {
    return {503, AdmissionErrorText(why), status.code()};
  }
  return Reply(pod, AdmissionVerdict{false, std::nullopt, {}, 400, "gpuest: " + why},
               status.code());
}

// The claim's requests gpuest sizes: those of a configured class asked for `exactly`;
// one it must leave as it is gets a warning saying why. spec: where its requests are
// ("spec", a template's "spec.spec").
std::vector<SizedRequest> RequestsToSize(const AdmissionPod& claim,
                                         const std::string& object,
                                         const std::string& spec,
                                         const DraClasses& dra_classes,
                                         std::vector<std::string>& warnings) {
  std::vector<SizedRequest> sized;
  for (const AdmissionClaimRequest& r : claim.claim_requests) {
    const DraDeviceClass* cls = r.exactly ? dra_classes.Find(r.device_class) : nullptr;
    if (cls == nullptr) continue;  // Another class's, or a list already: not gpuest's.
    if (const std::string why = KeptAsIs(r, *cls); !why.empty()) {
      warnings.push_back(absl::StrCat("gpuest: ", object, ": ", spec,
                                      ".devices.requests[", r.index, "] (", r.name,
                                      ") is left as it is: ", why));
      continue;
    }
    SizedRequest& s = sized.emplace_back();
    s.shape = {r.index, r.name, r.exactly_json};
    s.cls = cls;
  }
  return sized;
}

// The answer for a claim with a description but no request gpuest sizes: untouched,
// with warnings saying so.
AdmissionVerdict NothingToSize(const std::string& object, const DraClasses& dra_classes,
                               std::vector<std::string> warnings) {
  std::vector<std::string> classes;
  for (const DraDeviceClass& c : dra_classes.classes) classes.push_back(c.device_class);
  warnings.push_back(absl::StrCat("gpuest: ", object, " has ", kDescriptionAnnotation,
                                  " but no request gpuest sizes (an exactly of ",
                                  absl::StrJoin(classes, ", "), "): left as it is"));
  AdmissionVerdict untouched;
  SetWarnings(warnings, untouched);
  return untouched;
}

// The job ranked on the GPU models the sized requests' classes may take.
absl::StatusOr<v1::RankGpusResponse> RankForClaim(const v1::EstimateRequest& job,
                                                  const std::vector<SizedRequest>& sized,
                                                  const placement::ModelSet& set,
                                                  const common::WorkDeadline& deadline) {
  std::vector<const DraDeviceClass*> classes;
  for (const SizedRequest& s : sized) classes.push_back(s.cls);
  v1::RankGpusRequest rank = RankRequestFor(job, classes);
  const bool whole = std::any_of(classes.begin(), classes.end(),
                                 [](const DraDeviceClass* c) { return !c->mig; });
  const bool mig = std::any_of(classes.begin(), classes.end(),
                               [](const DraDeviceClass* c) { return c->mig; });
  if (rank.gpus().empty() && whole != mig) {
    // Only the kind the classes ask for is estimated: a whole-GPU class needs no MIG
    // profile's figure (the answer is the same, SizeClaim keeps the class's kind).
    for (const core::GpuProfile& gpu : set.registry().gpus().All()) {
      if (core::IsMigProfile(gpu) == mig) rank.add_gpus(gpu.id);
    }
  }
  return set.placement().RankGpus(rank, deadline);
}

ClaimShape ClaimShapeOf(const AdmissionPod& claim) {
  ClaimShape shape;
  shape.is_template = claim.kind == "ResourceClaimTemplate";
  shape.has_metadata = claim.has_metadata;
  shape.has_spec_metadata = claim.has_spec_metadata;
  shape.has_annotations = claim.has_annotations;
  shape.has_config = claim.has_config;
  return shape;
}

}  // namespace

common::HttpReply AdmissionWebhook::MutateClaim(const AdmissionPod& claim,
                                                const std::string& object,
                                                const std::string& description,
                                                const common::WorkDeadline& deadline,
                                                bool admit_unsized) const {
  auto fail = [&](const absl::Status& status) {
    return FailedReply(claim, admit_unsized, status);
  };
  const std::string spec = claim.kind == "ResourceClaimTemplate" ? "spec.spec" : "spec";
  std::vector<std::string> warnings;
  std::vector<SizedRequest> sized =
      RequestsToSize(claim, object, spec, options_.dra_classes, warnings);
  if (sized.empty()) {
    return Reply(claim, NothingToSize(object, options_.dra_classes, std::move(warnings)));
  }
  const std::string where = DescriptionWhere(object);
  absl::StatusOr<PodJob> described =
      ReadPodJob(description, options_.descriptions_dir, where);
  if (!described.ok()) return fail(described.status());
  v1::EstimateRequest& job = described->request;
  // The description may name one GPU: the claim then asks for that model only.
  const std::string only_gpu = job.gpu();
  job.clear_gpu();
  absl::StatusOr<v1::RankGpusResponse> ranking =
      RankForClaim(job, sized, *models_.Current(), deadline);
  if (!ranking.ok()) {
    return fail(absl::Status(ranking.status().code(),
                             absl::StrCat(where, ": ", ranking.status().message())));
  }
  for (SizedRequest& s : sized) {
    absl::StatusOr<ClaimSizing> sizing =
        SizeClaim(*ranking, *s.cls, only_gpu,
                  absl::StrCat(object, ": ", spec, ".devices.requests[", s.shape.index,
                               "] (", s.shape.name, ")"));
    if (!sizing.ok()) return fail(sizing.status());
    s.sizing = *std::move(sizing);
    for (const std::string& w : s.sizing.warnings) {
      warnings.push_back(absl::StrCat("gpuest: ", w));
    }
  }
  absl::StatusOr<std::string> patch = ClaimPatchJson(ClaimShapeOf(claim), sized);
  if (!patch.ok()) return fail(patch.status());
  AdmissionVerdict verdict;
  verdict.patch = *std::move(patch);
  for (const v1::Warning& w : ranking->warnings()) {
    warnings.push_back(absl::StrCat("gpuest: ", w.message()));
  }
  SetWarnings(warnings, verdict);
  return Reply(claim, verdict);
}

common::HttpReply AdmissionWebhook::MutatePod(const AdmissionPod& pod,
                                              const std::string& object,
                                              const std::string& description,
                                              const common::WorkDeadline& deadline,
                                              bool admit_unsized) const {
  auto fail = [&](const absl::Status& status) {
    return FailedReply(pod, admit_unsized, status);
  };
  if (pod.containers.empty()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("pod ", pod.pod, ": spec.containers: none to set the request on")));
  }
  const std::string where = DescriptionWhere(object);
  absl::StatusOr<PodJob> described =
      ReadPodJob(description, options_.descriptions_dir, where);
  if (!described.ok()) return fail(described.status());
  v1::EstimateRequest& job = described->request;
  if (job.gpu().empty() && !options_.gpu.empty()) job.set_gpu(options_.gpu);
  absl::StatusOr<v1::EstimateResponse> estimate =
      models_.Current()->engine().Estimate(job, deadline);
  if (!estimate.ok()) {
    return fail(absl::Status(estimate.status().code(),
                             absl::StrCat(where, ": ", estimate.status().message())));
  }
  absl::StatusOr<MemoryRequest> memory =
      MemoryRequestFor(options_.scheduler, estimate->recommendation().memory_bytes());
  if (!memory.ok()) return fail(memory.status());
  std::vector<std::string> warnings;
  const int container = GpuContainer(pod, warnings);
  absl::StatusOr<PodShape> shape = ShapeOf(pod, *memory, container);
  if (!shape.ok()) return fail(shape.status());

  AdmissionVerdict sized;
  sized.patch = PodPatchJson(*memory, PodFiguresOf(*estimate), *shape);
  const v1::MemoryCap& cap = estimate->recommendation().cap();
  if (std::string note = EnforcementNote(options_.scheduler, *memory, cap.needed(),
                                         cap.per_process_memory_fraction());
      !note.empty()) {
    while (!note.empty() && note.back() == '\n') note.pop_back();
    warnings.push_back(std::move(note));
  }
  for (const v1::Warning& w : estimate->warnings()) {
    warnings.push_back(absl::StrCat("gpuest: ", w.message()));
  }
  SetWarnings(warnings, sized);
  return Reply(pod, sized);
}

common::HttpReply AdmissionWebhook::Mutate(const std::string& body,
                                           const common::WorkDeadline& deadline) const {
  absl::StatusOr<AdmissionPod> parsed = ParseAdmissionReview(body);
  if (!parsed.ok()) {
    return {400, AdmissionErrorText(std::string(parsed.status().message())),
            parsed.status().code()};
  }
  const AdmissionPod& pod = *parsed;
  const bool is_claim =
      pod.kind == "ResourceClaim" || pod.kind == "ResourceClaimTemplate";
  const auto description = pod.annotations.find(kDescriptionAnnotation);
  if ((pod.kind != "Pod" && !is_claim) || pod.operation != "CREATE" ||
      description == pod.annotations.end()) {
    return Reply(pod, AdmissionVerdict{});  // Not gpuest's: untouched.
  }
  // How messages name the object: "pod ml/train", "ResourceClaimTemplate ml/gpu".
  const std::string object =
      is_claim ? absl::StrCat(pod.kind, " ", pod.pod) : absl::StrCat("pod ", pod.pod);
  const auto on_error = pod.annotations.find(kOnErrorAnnotation);
  const std::string on_error_value =
      on_error == pod.annotations.end() ? "refuse" : on_error->second;
  if (on_error_value != "allow" && on_error_value != "refuse") {
    return Reply(pod, OnErrorRefusal(object, on_error_value),
                 absl::StatusCode::kInvalidArgument);
  }
  // A failure: the pod's is refused with its reason, the server's is an HTTP error
  // for the failurePolicy; a pod that asked is admitted unsized either way.
  const bool admit_unsized = on_error_value == "allow";
  if (is_claim) {
    return MutateClaim(pod, object, description->second, deadline, admit_unsized);
  }
  return MutatePod(pod, object, description->second, deadline, admit_unsized);
}

}  // namespace gpuest::kubernetes
