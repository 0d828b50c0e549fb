#include "integrations/kubernetes/admission_review.h"

#include <simdjson.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/json_guard.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace gpuest::kubernetes {

static_assert(kAdmissionBodyPadding >= simdjson::SIMDJSON_PADDING);

namespace {

namespace dom = simdjson::dom;

absl::Status WrongType(const std::string& where, const char* wanted) {
  return absl::InvalidArgumentError(
      absl::StrCat("AdmissionReview.", where, ": not ", wanted));
}

// A field that may be absent or null; when present it must be of the wanted type.
template <typename T>
absl::Status Optional(dom::object parent, const char* key, const std::string& where,
                      const char* wanted, std::optional<T>& out) {
  dom::element value;
  if (parent[key].get(value) != simdjson::SUCCESS || value.is_null()) return {};
  T typed;
  if (value.get(typed) != simdjson::SUCCESS) return WrongType(where, wanted);
  out = typed;
  return {};
}

// The string-valued entries of a map (labels, annotations, limits); a whole number is
// kept as its text (a client may write a quantity as a number), others left out.
absl::Status StringMap(dom::object map, std::map<std::string, std::string>& out) {
  for (dom::key_value_pair field : map) {
    std::string_view text;
    uint64_t whole = 0;
    if (field.value.get_string().get(text) == simdjson::SUCCESS) {
      out.emplace(std::string(field.key), std::string(text));
    } else if (field.value.get_uint64().get(whole) == simdjson::SUCCESS) {
      out.emplace(std::string(field.key), std::to_string(whole));
    }
  }
  return {};
}

absl::Status ReadContainer(dom::object container, size_t i, AdmissionContainer& out) {
  const std::string where = absl::StrCat("request.object.spec.containers[", i, "]");
  std::optional<std::string_view> name;
  GPUEST_RETURN_IF_ERROR(Optional(container, "name", where + ".name", "a string", name));
  if (name) out.name = std::string(*name);
  std::optional<dom::object> resources;
  GPUEST_RETURN_IF_ERROR(
      Optional(container, "resources", where + ".resources", "an object", resources));
  if (!resources) return {};
  out.has_resources = true;
  std::optional<dom::object> limits;
  GPUEST_RETURN_IF_ERROR(
      Optional(*resources, "limits", where + ".resources.limits", "an object", limits));
  if (!limits) return {};
  out.has_limits = true;
  return StringMap(*limits, out.limits);
}

absl::Status ReadPod(dom::object pod, AdmissionPod& out) {
  std::optional<dom::object> metadata;
  GPUEST_RETURN_IF_ERROR(
      Optional(pod, "metadata", "request.object.metadata", "an object", metadata));
  if (metadata) {
    std::optional<std::string_view> ns, name, generate;
    GPUEST_RETURN_IF_ERROR(Optional(*metadata, "namespace",
                                    "request.object.metadata.namespace", "a string", ns));
    GPUEST_RETURN_IF_ERROR(
        Optional(*metadata, "name", "request.object.metadata.name", "a string", name));
    GPUEST_RETURN_IF_ERROR(Optional(*metadata, "generateName",
                                    "request.object.metadata.generateName", "a string",
                                    generate));
    // simdjson's views are std::string_view; this abseil's string_view is its own.
    if (ns) out.pod = std::string(*ns) + "/";
    out.pod += name ? std::string(*name) : std::string(generate.value_or("?")) + "*";
    std::optional<dom::object> annotations;
    GPUEST_RETURN_IF_ERROR(Optional(*metadata, "annotations",
                                    "request.object.metadata.annotations", "an object",
                                    annotations));
    if (annotations) {
      out.has_annotations = true;
      GPUEST_RETURN_IF_ERROR(StringMap(*annotations, out.annotations));
    }
  }
  std::optional<dom::object> spec;
  GPUEST_RETURN_IF_ERROR(Optional(pod, "spec", "request.object.spec", "an object", spec));
  if (!spec) return {};
  std::optional<dom::array> containers;
  GPUEST_RETURN_IF_ERROR(Optional(*spec, "containers", "request.object.spec.containers",
                                  "an array", containers));
  if (!containers) return {};
  if (containers->size() > kMaxPodContainers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "AdmissionReview.request.object.spec.containers: ", containers->size(),
        " containers, over the limit of ", kMaxPodContainers));
  }
  size_t i = 0;
  for (dom::element item : *containers) {
    dom::object container;
    if (item.get_object().get(container) != simdjson::SUCCESS) {
      return WrongType(absl::StrCat("request.object.spec.containers[", i, "]"),
                       "an object");
    }
    AdmissionContainer& c = out.containers.emplace_back();
    GPUEST_RETURN_IF_ERROR(ReadContainer(container, i++, c));
  }
  return {};
}

// metadata's name for messages (namespace/name, or namespace/generateName*) into
// out.pod, and its annotations into annotations (when given).
absl::Status ReadMetadata(dom::object metadata, const std::string& where,
                          AdmissionPod& out,
                          std::map<std::string, std::string>* annotations,
                          bool* has_annotations) {
  std::optional<std::string_view> ns, name, generate;
  GPUEST_RETURN_IF_ERROR(
      Optional(metadata, "namespace", where + ".namespace", "a string", ns));
  GPUEST_RETURN_IF_ERROR(Optional(metadata, "name", where + ".name", "a string", name));
  GPUEST_RETURN_IF_ERROR(
      Optional(metadata, "generateName", where + ".generateName", "a string", generate));
  if (ns || name || generate) {
    out.pod = ns ? std::string(*ns) + "/" : std::string();
    out.pod += name ? std::string(*name) : std::string(generate.value_or("?")) + "*";
  }
  if (annotations == nullptr) return {};
  std::optional<dom::object> map;
  GPUEST_RETURN_IF_ERROR(
      Optional(metadata, "annotations", where + ".annotations", "an object", map));
  if (map) {
    if (has_annotations != nullptr) *has_annotations = true;
    GPUEST_RETURN_IF_ERROR(StringMap(*map, *annotations));
  }
  return {};
}

// A ResourceClaimSpec at where (request.object.spec, or a template's .spec.spec).
absl::Status ReadClaimSpec(dom::object spec, const std::string& where,
                           AdmissionPod& out) {
  std::optional<dom::object> devices;
  GPUEST_RETURN_IF_ERROR(
      Optional(spec, "devices", where + ".devices", "an object", devices));
  if (!devices) return {};
  std::optional<dom::array> config;
  GPUEST_RETURN_IF_ERROR(
      Optional(*devices, "config", where + ".devices.config", "an array", config));
  out.has_config = config.has_value();
  std::optional<dom::array> requests;
  GPUEST_RETURN_IF_ERROR(
      Optional(*devices, "requests", where + ".devices.requests", "an array", requests));
  if (!requests) return {};
  if (requests->size() > kMaxClaimRequests) {
    return absl::InvalidArgumentError(
        absl::StrCat("AdmissionReview.", where, ".devices.requests: ", requests->size(),
                     " requests, over the API's limit of ", kMaxClaimRequests));
  }
  size_t i = 0;
  for (dom::element item : *requests) {
    const std::string at = absl::StrCat(where, ".devices.requests[", i, "]");
    dom::object request;
    if (item.get_object().get(request) != simdjson::SUCCESS) {
      return WrongType(at, "an object");
    }
    AdmissionClaimRequest& r = out.claim_requests.emplace_back();
    r.index = i++;
    std::optional<std::string_view> name;
    GPUEST_RETURN_IF_ERROR(Optional(request, "name", at + ".name", "a string", name));
    if (name) r.name = std::string(*name);
    std::optional<dom::object> exactly;
    GPUEST_RETURN_IF_ERROR(
        Optional(request, "exactly", at + ".exactly", "an object", exactly));
    if (!exactly) continue;
    r.exactly = true;
    std::optional<std::string_view> device_class;
    GPUEST_RETURN_IF_ERROR(Optional(*exactly, "deviceClassName",
                                    at + ".exactly.deviceClassName", "a string",
                                    device_class));
    if (device_class) r.device_class = std::string(*device_class);
    r.exactly_json = simdjson::minify(*exactly);
  }
  return {};
}

absl::Status ReadClaim(dom::object object, bool is_template, AdmissionPod& out) {
  std::optional<dom::object> metadata;
  GPUEST_RETURN_IF_ERROR(
      Optional(object, "metadata", "request.object.metadata", "an object", metadata));
  bool own_annotations = false;
  out.has_metadata = metadata.has_value();
  if (metadata) {
    GPUEST_RETURN_IF_ERROR(ReadMetadata(*metadata, "request.object.metadata", out,
                                        &out.annotations, &own_annotations));
  }
  std::optional<dom::object> spec;
  GPUEST_RETURN_IF_ERROR(
      Optional(object, "spec", "request.object.spec", "an object", spec));
  if (!is_template) {
    out.has_annotations = own_annotations;
    return spec ? ReadClaimSpec(*spec, "request.object.spec", out) : absl::OkStatus();
  }
  if (!spec) return {};
  // What the claims carry wins over the template's own annotations.
  std::optional<dom::object> claim_metadata;
  GPUEST_RETURN_IF_ERROR(Optional(*spec, "metadata", "request.object.spec.metadata",
                                  "an object", claim_metadata));
  if (claim_metadata) {
    out.has_spec_metadata = true;
    std::map<std::string, std::string> carried;
    AdmissionPod ignored;
    GPUEST_RETURN_IF_ERROR(ReadMetadata(*claim_metadata, "request.object.spec.metadata",
                                        ignored, &carried, &out.has_annotations));
    for (auto& [key, value] : carried) out.annotations[key] = std::move(value);
  }
  std::optional<dom::object> claim_spec;
  GPUEST_RETURN_IF_ERROR(
      Optional(*spec, "spec", "request.object.spec.spec", "an object", claim_spec));
  return claim_spec ? ReadClaimSpec(*claim_spec, "request.object.spec.spec", out)
                    : absl::OkStatus();
}

// The review's request, parsed by parser (whose buffers then hold it): an
// AdmissionReview v1 of at most kMaxJsonDepth levels, no key named twice.
absl::StatusOr<dom::object> ReviewRequest(dom::parser& parser, const std::string& body) {
  // Before parsing: the DOM's lookups take a key's first copy, where the API server's
  // Go decoder took the last, so a key named twice is refused, not read.
  GPUEST_RETURN_IF_ERROR(common::CheckJsonText(body, "AdmissionReview"));
  dom::element root;
  if (const simdjson::error_code e = parser.parse(body).get(root);
      e != simdjson::SUCCESS) {
    if (e == simdjson::DEPTH_ERROR) {
      return absl::InvalidArgumentError(
          absl::StrCat("AdmissionReview: JSON nested more than ", common::kMaxJsonDepth,
                       " levels deep"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("AdmissionReview: not JSON (", simdjson::error_message(e), ")"));
  }
  dom::object review;
  if (root.get_object().get(review) != simdjson::SUCCESS) {
    return WrongType("", "an object");
  }
  std::string_view api_version, kind;
  if (review["apiVersion"].get_string().get(api_version) != simdjson::SUCCESS ||
      api_version != "admission.k8s.io/v1" ||
      review["kind"].get_string().get(kind) != simdjson::SUCCESS ||
      kind != "AdmissionReview") {
    return absl::InvalidArgumentError(
        "AdmissionReview: apiVersion admission.k8s.io/v1 and kind AdmissionReview are "
        "needed (the webhook configuration's admissionReviewVersions is [v1])");
  }
  dom::object request;
  if (review["request"].get_object().get(request) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError(
        "AdmissionReview.request: missing or not an object");
  }
  return request;
}

// The request's own fields: uid, operation, dryRun and the object's kind.
absl::Status ReadRequestFields(dom::object request, AdmissionPod& out) {
  std::string_view uid;
  if (request["uid"].get_string().get(uid) != simdjson::SUCCESS || uid.empty()) {
    return absl::InvalidArgumentError(
        "AdmissionReview.request.uid: missing or not a string");
  }
  out.uid = std::string(uid.substr(0, 128));
  std::optional<std::string_view> operation;
  GPUEST_RETURN_IF_ERROR(
      Optional(request, "operation", "request.operation", "a string", operation));
  if (operation) out.operation = std::string(*operation);
  std::optional<bool> dry_run;
  GPUEST_RETURN_IF_ERROR(
      Optional(request, "dryRun", "request.dryRun", "a boolean", dry_run));
  out.dry_run = dry_run.value_or(false);
  std::optional<dom::object> kind_of;
  GPUEST_RETURN_IF_ERROR(Optional(request, "kind", "request.kind", "an object", kind_of));
  if (kind_of) {
    std::optional<std::string_view> k;
    GPUEST_RETURN_IF_ERROR(
        Optional(*kind_of, "kind", "request.kind.kind", "a string", k));
    if (k) out.kind = std::string(*k);
  }
  return {};
}

}  // namespace

absl::StatusOr<AdmissionPod> ParseAdmissionReview(const std::string& body) {
  // One parser per thread: its buffers grow to the largest body seen, then are reused.
  thread_local dom::parser parser;
  if (parser.max_depth() != common::kMaxJsonDepth &&
      parser.allocate(64 << 10, common::kMaxJsonDepth) != simdjson::SUCCESS) {
    return absl::ResourceExhaustedError("AdmissionReview: cannot allocate its parser");
  }
  absl::StatusOr<dom::object> request = ReviewRequest(parser, body);
  if (!request.ok()) return request.status();
  AdmissionPod out;
  GPUEST_RETURN_IF_ERROR(ReadRequestFields(*request, out));
  std::optional<dom::object> pod;
  GPUEST_RETURN_IF_ERROR(
      Optional(*request, "object", "request.object", "an object", pod));
  if (pod && out.kind == "Pod") GPUEST_RETURN_IF_ERROR(ReadPod(*pod, out));
  if (pod && (out.kind == "ResourceClaim" || out.kind == "ResourceClaimTemplate")) {
    GPUEST_RETURN_IF_ERROR(ReadClaim(*pod, out.kind == "ResourceClaimTemplate", out));
  }
  return out;
}

std::string AdmissionResponseText(const std::string& uid,
                                  const AdmissionVerdict& verdict) {
  nlohmann::ordered_json response;
  response["uid"] = uid;
  response["allowed"] = verdict.allowed;
  if (verdict.patch) {
    response["patchType"] = "JSONPatch";
    response["patch"] = absl::Base64Escape(*verdict.patch);
  }
  if (!verdict.allowed) {
    response["status"] = {{"code", verdict.code}, {"message", verdict.message}};
  }
  if (!verdict.warnings.empty()) response["warnings"] = verdict.warnings;
  nlohmann::ordered_json review = {{"apiVersion", "admission.k8s.io/v1"},
                                   {"kind", "AdmissionReview"},
                                   {"response", std::move(response)}};
  // Messages echo what the pod carried: bytes that are not UTF-8 become U+FFFD.
  return review.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string AdmissionErrorText(const std::string& why) {
  return nlohmann::json{{"error", "gpuest admission webhook: " + why}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace gpuest::kubernetes
