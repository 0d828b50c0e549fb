#include "integrations/kubernetes/dra_claim.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/embedded_file.h"
#include "common/json_guard.h"
#include "common/text_file.h"
#include "common/units.h"
#include "integrations/kubernetes/dra_device_classes_json.h"
#include "integrations/kubernetes/pod_patch.h"
#include "nlohmann/json.hpp"

namespace gpuest::kubernetes {
namespace {

using Json = nlohmann::ordered_json;

absl::Status Bad(const std::string& where, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
}

// A string field; required ones must be non-empty.
absl::StatusOr<std::string> Text(const Json& entry, const char* key,
                                 const std::string& where, bool required) {
  if (!entry.contains(key) || entry[key].is_null()) {
    if (required) return Bad(absl::StrCat(where, ".", key), "missing");
    return std::string();
  }
  if (!entry[key].is_string() || (required && entry[key].get<std::string>().empty())) {
    return Bad(absl::StrCat(where, ".", key), "not a non-empty string");
  }
  return entry[key].get<std::string>();
}

absl::StatusOr<uint64_t> QuantityField(const Json& value, const std::string& field) {
  if (!value.is_string()) return Bad(field, "not a quantity string such as \"1Gi\"");
  return ParseByteQuantity(value.get<std::string>(), field);
}

absl::StatusOr<DraRequestPolicy> ParsePolicy(const Json& policy,
                                             const std::string& where) {
  if (!policy.is_object()) return Bad(where, "not an object");
  DraRequestPolicy out;
  const bool range = policy.contains("validRange");
  const bool values = policy.contains("validValues");
  if (range == values) {
    return Bad(where, "needs exactly one of validRange and validValues");
  }
  if (values) {
    const Json& list = policy["validValues"];
    if (!list.is_array() || list.empty()) {
      return Bad(where + ".validValues", "not a non-empty list");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      absl::StatusOr<uint64_t> v =
          QuantityField(list[i], absl::StrCat(where, ".validValues[", i, "]"));
      if (!v.ok()) return v.status();
      if (!out.valid_values.empty() && *v <= out.valid_values.back()) {
        return Bad(absl::StrCat(where, ".validValues[", i, "]"),
                   "not above the one before (the API wants them ascending)");
      }
      out.valid_values.push_back(*v);
    }
    return out;
  }
  const Json& r = policy["validRange"];
  const std::string at = where + ".validRange";
  if (!r.is_object() || !r.contains("min")) return Bad(at, "needs min");
  absl::StatusOr<uint64_t> min = QuantityField(r["min"], at + ".min");
  if (!min.ok()) return min.status();
  out.min_bytes = *min;
  if (r.contains("step")) {
    absl::StatusOr<uint64_t> step = QuantityField(r["step"], at + ".step");
    if (!step.ok()) return step.status();
    if (*step == 0) return Bad(at + ".step", "0");
    out.step_bytes = *step;
  }
  if (r.contains("max")) {
    absl::StatusOr<uint64_t> max = QuantityField(r["max"], at + ".max");
    if (!max.ok()) return max.status();
    if (*max < out.min_bytes) return Bad(at + ".max", "below min");
    out.max_bytes = *max;
  }
  return out;
}

absl::StatusOr<DraDeviceClass> ParseClass(const Json& entry, const std::string& where) {
  if (!entry.is_object()) return Bad(where, "not an object");
  DraDeviceClass c;
  absl::StatusOr<std::string> text = Text(entry, "device_class", where, true);
  if (!text.ok()) return text.status();
  c.device_class = *text;
  if (!(text = Text(entry, "driver", where, true)).ok()) return text.status();
  c.driver = *text;
  if (!(text = Text(entry, "devices", where, true)).ok()) return text.status();
  if (*text != "whole_gpus" && *text != "mig_profiles") {
    return Bad(where + ".devices",
               absl::StrCat("'", common::Utf8Prefix(*text, 64),
                            "' is neither whole_gpus nor mig_profiles"));
  }
  c.mig = *text == "mig_profiles";
  if (!(text = Text(entry, "product_attribute", where, true)).ok()) return text.status();
  c.product_attribute = *text;
  if (!(text = Text(entry, "profile_attribute", where, c.mig)).ok()) return text.status();
  c.profile_attribute = *text;
  if (entry.contains("shared") && !entry["shared"].is_boolean()) {
    return Bad(where + ".shared", "not a boolean");
  }
  c.shared = entry.value("shared", false);
  if (!(text = Text(entry, "memory_capacity", where, c.shared)).ok()) {
    return text.status();
  }
  c.memory_capacity = *text;
  if (entry.contains("request_policy") && !entry["request_policy"].is_null()) {
    if (!c.shared) return Bad(where + ".request_policy", "set on a class not shared");
    absl::StatusOr<DraRequestPolicy> policy =
        ParsePolicy(entry["request_policy"], where + ".request_policy");
    if (!policy.ok()) return policy.status();
    c.policy = *std::move(policy);
  }
  if (entry.contains("cap") && !entry["cap"].is_null()) {
    if (!c.shared) return Bad(where + ".cap", "set on a class not shared");
    if (!entry["cap"].is_object()) return Bad(where + ".cap", "not an object");
    const std::string cap = entry["cap"].dump();
    if (!absl::StrContains(cap, "\"$LIMIT\"")) {
      return Bad(where + ".cap", "names no \"$LIMIT\" to hold the share");
    }
    c.cap_parameters = cap;
  }
  if (entry.contains("gpus") && !entry["gpus"].is_null()) {
    const Json& gpus = entry["gpus"];
    if (!gpus.is_array()) return Bad(where + ".gpus", "not a list of catalog GPUs");
    for (size_t i = 0; i < gpus.size(); ++i) {
      if (!gpus[i].is_string() || gpus[i].get<std::string>().empty()) {
        return Bad(absl::StrCat(where, ".gpus[", i, "]"), "not a non-empty string");
      }
      c.gpus.push_back(gpus[i].get<std::string>());
    }
  }
  return c;
}

// A catalog id as a DNS label (a subrequest's name): lowercase letters, digits and '-'.
std::string DnsLabel(const std::string& id) {
  std::string out;
  for (const char ch : absl::AsciiStrToLower(id)) {
    out.push_back(std::isalnum(static_cast<unsigned char>(ch)) ? ch : '-');
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  while (!out.empty() && out.front() == '-') out.erase(out.begin());
  return out.substr(0, 63);
}

std::string CelString(const std::string& text) {
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\\", "\\\\"}, {"\"", "\\\""}}),
                      "\"");
}

// The names nvidia-smi prints for a model: its name, and those of its aliases that
// are names rather than ids (they have a space: "NVIDIA A100-PCIE-40GB").
std::vector<std::string> ProductNames(const v1::GpuRanking& gpu) {
  std::vector<std::string> names = {gpu.name()};
  for (const std::string& alias : gpu.aliases()) {
    if (absl::StrContains(alias, ' ') &&
        std::find(names.begin(), names.end(), alias) == names.end()) {
      names.push_back(alias);
    }
  }
  return names;
}

std::string SelectorFor(const v1::GpuRanking& gpu, const DraDeviceClass& cls) {
  const std::string attributes =
      absl::StrCat("device.attributes[", CelString(cls.driver), "].");
  if (cls.mig) {
    // "NVIDIA A100-SXM4-40GB MIG 1g.5gb": the parent's name, then the profile.
    const size_t at = gpu.name().rfind(" MIG ");
    return absl::StrCat(attributes, cls.product_attribute,
                        " == ", CelString(gpu.name().substr(0, at)), " && ", attributes,
                        cls.profile_attribute,
                        " == ", CelString(gpu.name().substr(at + 5)));
  }
  const std::vector<std::string> names = ProductNames(gpu);
  if (names.size() == 1) {
    return absl::StrCat(attributes, cls.product_attribute, " == ", CelString(names[0]));
  }
  std::vector<std::string> quoted;
  for (const std::string& n : names) quoted.push_back(CelString(n));
  return absl::StrCat(attributes, cls.product_attribute, " in [",
                      absl::StrJoin(quoted, ", "), "]");
}

std::string GiB(uint64_t bytes) {
  return absl::StrFormat("%.1f GiB", common::InGiB(static_cast<double>(bytes)));
}

// The "$LIMIT" strings of the cap's parameters replaced by the share.
void FillLimit(Json& value, const std::string& limit) {
  if (value.is_string() && value.get<std::string>() == "$LIMIT") {
    value = limit;
  } else if (value.is_structured()) {
    for (Json& child : value) FillLimit(child, limit);
  }
}

// The request's firstAvailable list, and the cap configurations it needs.
absl::StatusOr<Json> SizedRequestJson(const SizedRequest& r, Json& configs) {
  Json exactly = Json::parse(r.shape.exactly_json, nullptr, false);
  if (exactly.is_discarded() || !exactly.is_object()) {
    return Bad(absl::StrCat("spec.devices.requests[", r.shape.index, "].exactly"),
               "not an object");
  }
  Json alternatives = Json::array();
  for (const ClaimAlternative& a : r.sizing.alternatives) {
    Json sub = {{"name", a.subrequest}, {"deviceClassName", r.cls->device_class}};
    Json selectors = Json::array();
    for (auto& [key, value] : exactly.items()) {
      if (key == "deviceClassName") continue;
      if (key == "selectors" && value.is_array()) {
        for (const Json& s : value) selectors.push_back(s);
        continue;
      }
      sub[key] = value;
    }
    selectors.push_back({{"cel", {{"expression", a.selector}}}});
    sub["selectors"] = std::move(selectors);
    if (r.cls->shared) {
      Json capacity = sub.contains("capacity") && sub["capacity"].is_object()
                          ? sub["capacity"]
                          : Json::object();
      if (!capacity.contains("requests") || !capacity["requests"].is_object()) {
        capacity["requests"] = Json::object();
      }
      capacity["requests"][r.cls->memory_capacity] = ByteQuantityText(a.request_bytes);
      sub["capacity"] = std::move(capacity);
      if (!r.cls->cap_parameters.empty()) {
        Json parameters = Json::parse(r.cls->cap_parameters);
        FillLimit(parameters, ByteQuantityText(a.request_bytes));
        configs.push_back(
            {{"requests", Json::array({absl::StrCat(r.shape.name, "/", a.subrequest)})},
             {"opaque",
              {{"driver", r.cls->driver}, {"parameters", std::move(parameters)}}}});
      }
    }
    alternatives.push_back(std::move(sub));
  }
  return Json{{"name", r.shape.name}, {"firstAvailable", std::move(alternatives)}};
}

// Whether name (a catalog id, an alias or the nvidia-smi name, in any case) names gpu.
bool NamedBy(const v1::GpuRanking& gpu, const std::string& name) {
  bool named =
      absl::EqualsIgnoreCase(gpu.gpu(), name) || absl::EqualsIgnoreCase(gpu.name(), name);
  for (const std::string& alias : gpu.aliases()) {
    named = named || absl::EqualsIgnoreCase(alias, name);
  }
  return named;
}

// gpu, a model of cls's kind the claim may ask for, added to out: as an alternative
// with its requirement (and for a shared device the request its policy rounds that to),
// or to left_out with why not.
void AddAlternative(const v1::GpuRanking& gpu, const DraDeviceClass& cls,
                    ClaimSizing& out) {
  if (gpu.fits() && out.alternatives.size() == kMaxAlternatives) {
    out.left_out.push_back(
        absl::StrCat(gpu.gpu(), " (past the API's ", kMaxAlternatives, " alternatives)"));
    return;
  }
  if (!gpu.fits()) {
    out.left_out.push_back(absl::StrCat(gpu.gpu(), " (needs ", GiB(gpu.peak_bytes()),
                                        " of ", GiB(gpu.capacity_bytes()), ")"));
    return;
  }
  ClaimAlternative a;
  a.gpu = gpu.gpu();
  a.subrequest = DnsLabel(gpu.gpu());
  a.selector = SelectorFor(gpu, cls);
  a.requirement_bytes = gpu.peak_bytes();  // GpuRanking's name for it.
  a.capacity_bytes = gpu.capacity_bytes();
  a.needs_cap = gpu.needs_cap();
  if (cls.shared) {
    // Unknown policy: whole MiB, up (a request a byte short is how a job is killed).
    const uint64_t mib =
        (a.requirement_bytes + common::kMiB - 1) / common::kMiB * common::kMiB;
    const std::optional<uint64_t> rounded =
        cls.policy ? RoundedByPolicy(a.requirement_bytes, *cls.policy)
                   : std::optional<uint64_t>(mib);
    if (!rounded || *rounded > a.capacity_bytes) {
      out.left_out.push_back(absl::StrCat(gpu.gpu(), " (", GiB(a.requirement_bytes),
                                          " rounds past what ", cls.device_class,
                                          "'s requestPolicy allows)"));
      return;
    }
    a.request_bytes = *rounded;
  }
  out.alternatives.push_back(std::move(a));
}

// For a shared class with no cap: that nothing holds the job to its share, and the
// fraction that would (on the first alternative).
std::string UncappedShareNote(const DraDeviceClass& cls,
                              const std::vector<ClaimAlternative>& alternatives) {
  const ClaimAlternative& first = alternatives.front();
  const bool transient =
      std::any_of(alternatives.begin(), alternatives.end(),
                  [](const ClaimAlternative& a) { return a.needs_cap; });
  return absl::StrFormat(
      "note: nothing inside a shared device enforces its memory share, and %s names no "
      "cap. %sCap the job at its share: "
      "torch.cuda.set_per_process_memory_fraction(share / the GPU's memory), %.3f on "
      "%s, before the first CUDA allocation",
      cls.device_class,
      transient ? "This job has a transient (cuDNN benchmark search) that uncapped can "
                  "take the device's free memory, other claims' shares included. "
                : "",
      static_cast<double>(first.request_bytes) /
          static_cast<double>(first.capacity_bytes),
      first.gpu);
}

}  // namespace

const DraDeviceClass* DraClasses::Find(std::string_view device_class) const {
  for (const DraDeviceClass& c : classes) {
    if (c.device_class == device_class) return &c;
  }
  return nullptr;
}

absl::StatusOr<DraClasses> ParseDraClasses(std::string_view text,
                                           const std::string& what) {
  if (absl::Status shape =
          common::CheckJsonText(absl::string_view(text.data(), text.size()), what);
      !shape.ok()) {
    return shape;
  }
  const Json root = Json::parse(text, nullptr, false);
  if (root.is_discarded() || !root.is_object()) return Bad(what, "not a JSON object");
  if (!root.contains("device_classes") || !root["device_classes"].is_array()) {
    return Bad(what + ": device_classes", "missing or not a list");
  }
  DraClasses out;
  const Json& list = root["device_classes"];
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = absl::StrCat(what, ": device_classes[", i, "]");
    absl::StatusOr<DraDeviceClass> c = ParseClass(list[i], where);
    if (!c.ok()) return c.status();
    if (out.Find(c->device_class) != nullptr) {
      return Bad(where + ".device_class",
                 absl::StrCat("'", c->device_class, "' is listed twice"));
    }
    out.classes.push_back(*std::move(c));
  }
  return out;
}

const DraClasses& BuiltInDraClasses() {
  static const DraClasses* classes = common::ParseEmbeddedFileOrDie<DraClasses>(
      DraDeviceClassesJson(), "dra_device_classes.json",
      [](absl::string_view text, const std::string& file) {
        return ParseDraClasses(std::string_view(text.data(), text.size()), file);
      });
  return *classes;
}

absl::StatusOr<DraClasses> LoadDraClasses(const std::string& path) {
  if (path.empty()) return BuiltInDraClasses();
  absl::StatusOr<std::string> text =
      common::ReadTextFile(path, common::kMaxConfigFileBytes);
  if (!text.ok()) return text.status();
  return ParseDraClasses(*text, path);
}

absl::StatusOr<uint64_t> ParseByteQuantity(std::string_view text,
                                           const std::string& field) {
  static constexpr std::pair<const char*, uint64_t> kSuffixes[] = {
      {"Ki", uint64_t{1} << 10},
      {"Mi", uint64_t{1} << 20},
      {"Gi", uint64_t{1} << 30},
      {"Ti", uint64_t{1} << 40},
      {"k", 1000},
      {"M", 1000000},
      {"G", 1000000000},
      {"T", 1000000000000}};
  std::string_view digits = text;
  uint64_t unit = 1;
  for (const auto& [suffix, factor] : kSuffixes) {
    if (absl::EndsWith(absl::string_view(text.data(), text.size()), suffix)) {
      digits = text.substr(0, text.size() - std::string_view(suffix).size());
      unit = factor;
      break;
    }
  }
  uint64_t n = 0;
  if (digits.empty() ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char ch) { return ch >= '0' && ch <= '9'; }) ||
      !absl::SimpleAtoi(absl::string_view(digits.data(), digits.size()), &n) ||
      n > UINT64_MAX / unit) {
    return Bad(field, absl::StrCat("'",
                                   common::Utf8Prefix(
                                       absl::string_view(text.data(), text.size()), 32),
                                   "' is not a whole number of bytes (such as 10Gi)"));
  }
  return n * unit;
}

std::string ByteQuantityText(uint64_t bytes) {
  if (bytes != 0 && bytes % common::kGiB == 0)
    return absl::StrCat(bytes / common::kGiB, "Gi");
  if (bytes != 0 && bytes % common::kMiB == 0)
    return absl::StrCat(bytes / common::kMiB, "Mi");
  return absl::StrCat(bytes);
}

std::optional<uint64_t> RoundedByPolicy(uint64_t bytes, const DraRequestPolicy& policy) {
  if (!policy.valid_values.empty()) {
    for (uint64_t v : policy.valid_values) {
      if (v >= bytes) return v;
    }
    return std::nullopt;
  }
  uint64_t rounded = std::max(bytes, policy.min_bytes);
  if (policy.step_bytes && rounded > policy.min_bytes) {
    const uint64_t step = *policy.step_bytes;
    const uint64_t over = rounded - policy.min_bytes;
    const uint64_t steps = over / step + (over % step != 0 ? 1 : 0);
    if (steps > (UINT64_MAX - policy.min_bytes) / step) return std::nullopt;
    rounded = policy.min_bytes + steps * step;
  }
  if (policy.max_bytes && rounded > *policy.max_bytes) return std::nullopt;
  return rounded;
}

v1::RankGpusRequest RankRequestFor(const v1::EstimateRequest& job,
                                   const std::vector<const DraDeviceClass*>& classes) {
  v1::RankGpusRequest rank;
  *rank.mutable_job()->mutable_description() = job;
  bool every_class_lists = !classes.empty();
  for (const DraDeviceClass* c : classes) every_class_lists &= !c->gpus.empty();
  if (every_class_lists) {
    for (const DraDeviceClass* c : classes) {
      for (const std::string& gpu : c->gpus) {
        if (std::find(rank.gpus().begin(), rank.gpus().end(), gpu) == rank.gpus().end()) {
          rank.add_gpus(gpu);
        }
      }
    }
  }
  return rank;
}

absl::StatusOr<ClaimSizing> SizeClaim(const v1::RankGpusResponse& ranking,
                                      const DraDeviceClass& cls,
                                      const std::string& only_gpu,
                                      const std::string& where) {
  ClaimSizing out;
  out.models_version = ranking.models_version();
  bool named_seen = only_gpu.empty();
  for (const v1::GpuRanking& gpu : ranking.gpus()) {
    if (gpu.mig() != cls.mig) continue;
    // The class's own models, when it lists them (the ranking may hold other classes').
    if (!cls.gpus.empty() &&
        std::none_of(cls.gpus.begin(), cls.gpus.end(),
                     [&](const std::string& name) { return NamedBy(gpu, name); })) {
      continue;
    }
    if (!only_gpu.empty()) {
      if (!NamedBy(gpu, only_gpu)) continue;
      named_seen = true;
    }
    AddAlternative(gpu, cls, out);
  }
  if (!named_seen) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ".gpu: '", common::Utf8Prefix(only_gpu, 64), "' is no ",
        cls.mig ? "MIG profile" : "whole GPU", " of the catalog (", cls.device_class,
        " asks for ", cls.mig ? "MIG profiles" : "whole GPUs", ")"));
  }
  if (out.alternatives.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": no GPU model of device class ", cls.device_class,
                     " fits the job: ", absl::StrJoin(out.left_out, ", ")));
  }
  if (std::any_of(out.left_out.begin(), out.left_out.end(), [](const std::string& why) {
        return absl::StrContains(why, "alternatives)");
      })) {
    out.warnings.push_back(absl::StrCat(
        "note: the job fits more GPU models than the ", kMaxAlternatives,
        " alternatives a request may list; the tightest fits are kept. List the models "
        "the cluster has in the gpus of ",
        cls.device_class, "'s entry (dra_device_classes.json)"));
  }
  if (cls.shared && cls.cap_parameters.empty()) {
    out.warnings.push_back(UncappedShareNote(cls, out.alternatives));
  }
  return out;
}

absl::StatusOr<std::string> ClaimPatchJson(const ClaimShape& shape,
                                           const std::vector<SizedRequest>& requests) {
  Json patch = Json::array();
  auto add = [&patch](const std::string& path, Json value, const char* op = "add") {
    patch.push_back({{"op", op}, {"path", path}, {"value", std::move(value)}});
  };
  const std::string spec = shape.is_template ? "/spec/spec" : "/spec";
  const std::string meta = shape.is_template ? "/spec/metadata" : "/metadata";
  Json configs = Json::array();
  Json requirements = Json::object();
  std::vector<std::string> sized;
  std::string models_version;
  for (const SizedRequest& r : requests) {
    absl::StatusOr<Json> request = SizedRequestJson(r, configs);
    if (!request.ok()) return request.status();
    add(absl::StrCat(spec, "/devices/requests/", r.shape.index), *std::move(request),
        "replace");
    std::vector<std::string> models;
    for (const ClaimAlternative& a : r.sizing.alternatives) {
      requirements[absl::StrCat(r.shape.name, "/", a.subrequest)] =
          std::to_string(a.requirement_bytes);
      models.push_back(r.cls->shared
                           ? absl::StrCat(a.gpu, " ", ByteQuantityText(a.request_bytes))
                           : a.gpu);
    }
    std::string line = absl::StrCat(r.shape.name, " (", r.cls->device_class,
                                    "): ", absl::StrJoin(models, ", "));
    if (!r.sizing.left_out.empty()) {
      absl::StrAppend(&line, "; left out: ", absl::StrJoin(r.sizing.left_out, ", "));
    }
    sized.push_back(std::move(line));
    models_version = r.sizing.models_version;
  }
  if (!configs.empty()) {
    if (!shape.has_config) {
      add(spec + "/devices/config", std::move(configs));
    } else {
      for (Json& c : configs) add(spec + "/devices/config/-", std::move(c));
    }
  }
  // RFC 6902 adds a member only to an object that exists.
  if ((shape.is_template && !shape.has_spec_metadata) ||
      (!shape.is_template && !shape.has_metadata)) {
    add(meta, {{"annotations", Json::object()}});
  } else if (!shape.has_annotations) {
    add(meta + "/annotations", Json::object());
  }
  auto annotate = [&](const char* key, std::string value) {
    add(absl::StrCat(meta, "/annotations/", JsonPointerToken(key)), std::move(value));
  };
  annotate(kClaimRequirementsAnnotation, requirements.dump());
  annotate(kClaimSizedAnnotation, common::Utf8Prefix(absl::StrJoin(sized, "; "), 4096));
  if (!models_version.empty()) annotate("gpuest.io/models-version", models_version);
  return patch.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
}

std::string ClaimTemplateSkeleton(const std::string& name,
                                  const std::string& description_value,
                                  const DraDeviceClass& cls) {
  const Json skeleton = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceClaimTemplate"},
      {"metadata", {{"name", name}}},
      {"spec",
       {{"metadata", {{"annotations", {{"gpuest.io/description", description_value}}}}},
        {"spec",
         {{"devices",
           {{"requests",
             Json::array(
                 {{{"name", "gpu"},
                   {"exactly", {{"deviceClassName", cls.device_class}}}}})}}}}}}}};
  return skeleton.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

absl::StatusOr<std::string> ClaimTemplateJson(const std::string& name,
                                              const std::string& description_value,
                                              const DraDeviceClass& cls,
                                              const ClaimSizing& sizing) {
  const Json skeleton = Json::parse(ClaimTemplateSkeleton(name, description_value, cls));
  ClaimShape shape;
  shape.is_template = true;
  SizedRequest request;
  request.shape.index = 0;
  request.shape.name = "gpu";
  request.shape.exactly_json =
      skeleton["spec"]["spec"]["devices"]["requests"][0]["exactly"].dump();
  request.cls = &cls;
  request.sizing = sizing;
  absl::StatusOr<std::string> patch = ClaimPatchJson(shape, {request});
  if (!patch.ok()) return patch.status();
  return skeleton.patch(Json::parse(*patch))
             .dump(2, ' ', false, Json::error_handler_t::replace) +
         "\n";
}

}  // namespace gpuest::kubernetes
