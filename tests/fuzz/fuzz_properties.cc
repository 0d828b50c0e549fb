#include "tests/fuzz/fuzz_properties.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/json_guard.h"
#include "estimators/core/request_validation.h"
#include "gpuest/v1/estimate.pb.h"
#include "integrations/kubernetes/admission_review.h"
#include "integrations/kubernetes/dra_claim.h"
#include "integrations/kubernetes/extender_args.h"
#include "integrations/kubernetes/kube_extender.h"
#include "integrations/kubernetes/kube_nodes.h"
#include "integrations/kubernetes/pod_patch.h"
#include "nlohmann/json.hpp"
#include "requests/request_files.h"
#include "requests/summary_parser.h"

namespace gpuest::fuzz {
namespace {

// Far above any real refusal, far below what breaks a client's status handling.
constexpr size_t kMaxMessageBytes = 1024;

absl::Status Broken(absl::string_view property, const absl::Status& status) {
  return absl::InternalError(absl::StrCat(property, ": ", status.ToString()));
}

absl::Status CheckSummary(const absl::StatusOr<v1::ModelDescription>& model) {
  if (!model.ok()) {
    if (!absl::StrContains(model.status().message(), "fuzz.txt")) {
      return Broken("a refusal names the source", model.status());
    }
    return absl::OkStatus();
  }
  for (int i = 0; i < model->layers_size(); ++i) {
    if (model->layers(i).type().empty()) {
      return absl::InternalError(absl::StrCat("layer ", i, " has no type"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DescriptionTextProperties(absl::string_view data) {
  requests::ReadOptions options;
  options.batch_size = 32;  // A summary needs one; a description takes it.
  const auto request =
      requests::ParseRequestText(std::string(data), "fuzz.json", options);
  if (!request.ok()) {
    if (!absl::StrContains(request.status().message(), "fuzz.json")) {
      return Broken("a refusal names the input", request.status());
    }
    return absl::OkStatus();
  }
  const absl::Status valid = core::ValidateRequest(*request, core::ValidationLimits{});
  if (!valid.ok() && valid.code() != absl::StatusCode::kInvalidArgument) {
    return Broken("validation refuses with InvalidArgument", valid);
  }
  return absl::OkStatus();
}

absl::Status SummaryParserProperties(absl::string_view data) {
  for (const auto& model : {requests::ParseModelSummary(data, "fuzz.txt"),
                            requests::ParseModelSummaryAs(
                                requests::SummaryFormat::kTorchsummary, data, "fuzz.txt"),
                            requests::ParseModelSummaryAs(
                                requests::SummaryFormat::kTorchinfo, data, "fuzz.txt")}) {
    if (absl::Status s = CheckSummary(model); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status RequestValidationProperties(absl::string_view data) {
  v1::EstimateRequest request;
  if (!request.ParseFromArray(data.data(), static_cast<int>(data.size()))) {
    return absl::OkStatus();  // Not a request: gRPC refuses it before validation.
  }
  // Small limits as well as the server's defaults, so that the limit paths run too.
  core::ValidationLimits small;
  small.max_layers = 8;
  small.max_trace_events = 16;
  small.max_batch_size = 1024;
  small.max_name_length = 16;
  for (const core::ValidationLimits& limits : {core::ValidationLimits{}, small}) {
    const absl::Status status = core::ValidateRequest(request, limits);
    if (status.ok()) continue;
    if (status.code() != absl::StatusCode::kInvalidArgument) {
      return Broken("validation refuses with InvalidArgument", status);
    }
    // "model.layers[3].parameters: ...": a field path first, and never the caller's
    // input echoed whole (an 8 KB estimator id once broke the client this way).
    const std::string message(status.message());
    const size_t colon = message.find(": ");
    if (colon == std::string::npos || colon == 0) {
      return Broken("a refusal starts with a field path", status);
    }
    if (message.size() > kMaxMessageBytes) {
      return Broken(absl::StrCat("a refusal is at most ", kMaxMessageBytes, " bytes"),
                    absl::Status(status.code(), message.substr(0, 200)));
    }
  }
  return absl::OkStatus();
}

absl::Status ExtenderArgsProperties(absl::string_view data) {
  std::string body = kubernetes::PaddedCopy(std::string_view(data.data(), data.size()));
  nlohmann::json reply = {{"Error", ""}};
  try {
    const absl::StatusOr<kubernetes::ExtenderArgs> args =
        kubernetes::ParseExtenderArgs(body);
    if (!args.ok()) {
      if (args.status().code() != absl::StatusCode::kInvalidArgument) {
        return Broken("a body is refused with InvalidArgument", args.status());
      }
      reply["Error"] = std::string(args.status().message());
      (void)kubernetes::ReplyText(reply);
      return absl::OkStatus();
    }
    std::vector<std::string_view> nodes;
    for (const kubernetes::ExtenderNode& node : args->nodes) {
      if (node.json.empty() || node.json.front() != '{' || node.json.back() != '}' ||
          node.json.data() < body.data() ||
          node.json.data() + node.json.size() > body.data() + body.size()) {
        return Broken("a node's text is an object inside the body",
                      absl::InternalError(std::string(node.json.substr(0, 200))));
      }
      const absl::StatusOr<std::vector<kubernetes::NodeGpu>> gpus =
          kubernetes::NodeGpus(node.keys);
      if (!gpus.ok() && gpus.status().code() != absl::StatusCode::kInvalidArgument) {
        return Broken("a node's refusal is InvalidArgument", gpus.status());
      }
      reply["FailedNodes"][node.keys.name] =
          gpus.ok() ? "" : std::string(gpus.status().message());
      nodes.push_back(node.json);
    }
    // Echoed, as Filter does; the reply must be one JSON object.
    const std::string text =
        kubernetes::FilterReplyText(reply, args->node_list_json, args->items_json, nodes);
    if (!nlohmann::json::accept(text)) {
      return Broken("the filter's reply is JSON",
                    absl::InternalError(text.substr(0, 200)));
    }
  } catch (const std::exception& e) {
    return Broken("nothing throws", absl::InternalError(e.what()));
  }
  return absl::OkStatus();
}

absl::Status NodeGpusProperties(absl::string_view data) {
  auto check =
      [](const absl::StatusOr<std::vector<kubernetes::NodeGpu>>& gpus) -> absl::Status {
    if (!gpus.ok()) {
      if (gpus.status().code() != absl::StatusCode::kInvalidArgument) {
        return Broken("a node's refusal is InvalidArgument", gpus.status());
      }
      if (gpus.status().message().size() > kMaxMessageBytes ||
          !absl::StartsWith(gpus.status().message(), "node ")) {
        return Broken("a node's refusal names it, in at most 1 KiB", gpus.status());
      }
      return absl::OkStatus();
    }
    if (gpus->size() > static_cast<size_t>(kubernetes::kMaxNodeGpus)) {
      return Broken("a node holds at most kMaxNodeGpus GPUs",
                    absl::InternalError(absl::StrCat(gpus->size(), " GPUs")));
    }
    for (const kubernetes::NodeGpu& g : *gpus) {
      if (g.total_bytes > 0 && g.free_bytes > g.total_bytes) {
        return Broken("free is at most the total", absl::InternalError(g.model));
      }
    }
    return absl::OkStatus();
  };
  try {
    kubernetes::NodeKeys annotated;
    annotated.name = "fuzzed";
    annotated.model_label = "a100-40gb";
    annotated.gpus_annotation = std::string(data);
    if (absl::Status s = check(kubernetes::NodeGpus(annotated)); !s.ok()) return s;
    // The same bytes as a Node object, as the node cache file's reader takes one.
    if (!common::CheckJsonText(data, "node").ok()) return absl::OkStatus();
    const nlohmann::json node = nlohmann::json::parse(data, nullptr, false);
    if (node.is_discarded()) return absl::OkStatus();
    kubernetes::NodeKeys keys = kubernetes::NodeKeysOf(node);
    if (keys.name.empty()) keys.name = "unnamed";
    return check(kubernetes::NodeGpus(keys));
  } catch (const std::exception& e) {
    return Broken("nothing throws", absl::InternalError(e.what()));
  }
}

absl::Status AdmissionReviewProperties(absl::string_view data) {
  std::string body(data.data(), data.size());
  body.reserve(body.size() + kubernetes::kAdmissionBodyPadding);
  try {
    const absl::StatusOr<kubernetes::AdmissionPod> pod =
        kubernetes::ParseAdmissionReview(body);
    if (!pod.ok()) {
      if (pod.status().code() != absl::StatusCode::kInvalidArgument ||
          !absl::StartsWith(pod.status().message(), "AdmissionReview")) {
        return Broken("a refusal is InvalidArgument naming AdmissionReview",
                      pod.status());
      }
      if (pod.status().message().size() > kMaxMessageBytes) {
        return Broken("a refusal is short", absl::InternalError("too long"));
      }
      return absl::OkStatus();
    }
    if (pod->uid.empty() || pod->uid.size() > 128 ||
        pod->containers.size() > kubernetes::kMaxPodContainers) {
      return Broken("a parsed pod's uid and containers are bounded",
                    absl::InternalError(pod->uid.substr(0, 200)));
    }
    // A refusal echoing the pod's text, and a warning: the response is JSON.
    kubernetes::AdmissionVerdict verdict{
        false, std::nullopt, {pod->pod}, 400, "pod " + pod->pod};
    for (const auto& [key, value] : pod->annotations) verdict.warnings.push_back(value);
    if (!nlohmann::json::accept(kubernetes::AdmissionResponseText(pod->uid, verdict))) {
      return Broken("the response is JSON", absl::InternalError(pod->pod.substr(0, 200)));
    }
    if (!pod->containers.empty()) {
      kubernetes::PodShape shape;
      shape.has_annotations = pod->has_annotations;
      shape.has_resources = pod->containers[0].has_resources;
      shape.has_limits = pod->containers[0].has_limits;
      const absl::StatusOr<kubernetes::MemoryRequest> request =
          kubernetes::MemoryRequestFor(kubernetes::SharingScheduler::kHami, 1 << 30);
      const std::string patch =
          kubernetes::PodPatchJson(*request, kubernetes::PodFigures{}, shape);
      if (!nlohmann::json::accept(patch)) {
        return Broken("the patch is JSON", absl::InternalError(patch.substr(0, 200)));
      }
    }
    // A claim's (or template's) patch, for each request of a class gpuest sizes,
    // applies to the very object it was made for (every path it adds to exists).
    if (pod->claim_requests.size() > kubernetes::kMaxClaimRequests) {
      return Broken("a claim's requests are bounded", absl::InternalError(pod->pod));
    }
    // Read again from its canonical text, as kube-apiserver writes it (one value per
    // key: with duplicates, simdjson and nlohmann would read different ones).
    const nlohmann::json review = nlohmann::json::parse(body);
    std::string canonical = review.dump();
    canonical.reserve(canonical.size() + kubernetes::kAdmissionBodyPadding);
    const absl::StatusOr<kubernetes::AdmissionPod> claim =
        kubernetes::ParseAdmissionReview(canonical);
    if (!claim.ok()) return absl::OkStatus();
    std::vector<kubernetes::SizedRequest> sized;
    const kubernetes::DraClasses& classes = kubernetes::BuiltInDraClasses();
    for (const kubernetes::AdmissionClaimRequest& r : claim->claim_requests) {
      if (!r.exactly) continue;
      kubernetes::SizedRequest& one = sized.emplace_back();
      one.shape = {r.index, r.name, r.exactly_json};
      // Alternately a whole and a shared class, whatever the request named.
      one.cls = &classes.classes[sized.size() % 2 == 0 ? 0 : 2];
      kubernetes::ClaimAlternative a;
      a.gpu = a.subrequest = "a100-40gb";
      a.selector = "true";
      a.requirement_bytes = a.request_bytes = 1 << 30;
      one.sizing.alternatives.push_back(a);
    }
    if (!sized.empty()) {
      kubernetes::ClaimShape shape;
      shape.is_template = claim->kind == "ResourceClaimTemplate";
      shape.has_metadata = claim->has_metadata;
      shape.has_spec_metadata = claim->has_spec_metadata;
      shape.has_annotations = claim->has_annotations;
      shape.has_config = claim->has_config;
      const absl::StatusOr<std::string> patch = kubernetes::ClaimPatchJson(shape, sized);
      if (!patch.ok()) return Broken("a claim's patch is written", patch.status());
      // Throws (caught below as a finding) when a path does not exist.
      (void)review.at("request").at("object").patch(nlohmann::json::parse(*patch));
    }
  } catch (const std::exception& e) {
    return Broken("no exception", absl::InternalError(e.what()));
  }
  return absl::OkStatus();
}

}  // namespace gpuest::fuzz
