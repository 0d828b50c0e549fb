#include "estimators/gpumemnet/targets.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace gpuest::gpumemnet {

const char* HeadTargetName(HeadTarget target) {
  return target == HeadTarget::kUtilization ? "utilization" : "memory";
}

int HeadSpec::classes() const {
  if (memory()) return static_cast<int>(edges.size());  // N bins + top.
  return static_cast<int>(edges.size()) - 1;
}

int HeadSpec::MemoryClass(double bytes, bool oom) const {
  const int top = classes() - 1;
  if (oom || bytes >= edges.back()) return top;
  if (!(bytes >= 0)) return -1;
  return std::min(top - 1, static_cast<int>(bytes / static_cast<double>(width_bytes)));
}

int HeadSpec::UtilizationClass(double value) const {
  if (!(value >= 0) || edges.size() < 2) return -1;
  for (size_t k = 0; k + 2 < edges.size(); ++k) {
    if (value < edges[k + 1]) return static_cast<int>(k);
  }
  return static_cast<int>(edges.size()) - 2;
}

nlohmann::json HeadSpec::ToJson() const {
  nlohmann::json j = {
      {"name", name}, {"target", HeadTargetName(target)}, {"classes", classes()}};
  if (memory()) {
    j["width_bytes"] = width_bytes;
    j["width_gib"] = width_bytes / common::kGiB;
    j["edges_bytes"] = nlohmann::json::array();
    for (double e : edges) j["edges_bytes"].push_back(static_cast<uint64_t>(e));
    j["top_class"] = kTopClassLabel;
  } else {
    j["metric"] = metric;
    j["edges"] = edges;
    j["edges_source"] = edges_source;
  }
  return j;
}

absl::StatusOr<HeadSpec> HeadSpec::FromJson(
    common::strict_json::Fields<nlohmann::json>& f) {
  HeadSpec h;
  GPUEST_RETURN_IF_ERROR(f.Get("name", h.name));
  std::string target;
  GPUEST_RETURN_IF_ERROR(f.Get("target", target));
  if (target == HeadTargetName(HeadTarget::kMemory)) {
    h.target = HeadTarget::kMemory;
    std::vector<uint64_t> edges;
    uint64_t width_gib = 0;
    std::string top_class;
    GPUEST_RETURN_IF_ERROR(f.Get("width_bytes", h.width_bytes));
    GPUEST_RETURN_IF_ERROR(f.Get("edges_bytes", edges));
    // Written for people reading the manifest; they must say what the bins say.
    GPUEST_RETURN_IF_ERROR(f.Get("width_gib", width_gib));
    GPUEST_RETURN_IF_ERROR(f.Get("top_class", top_class));
    if (h.width_bytes == 0 || width_gib != h.width_bytes / common::kGiB) {
      return f.Error("width_gib", "does not match width_bytes");
    }
    if (top_class != kTopClassLabel) {
      return f.Error("top_class", absl::StrCat("must be \"", kTopClassLabel, "\""));
    }
    for (uint64_t e : edges) h.edges.push_back(static_cast<double>(e));
  } else if (target == HeadTargetName(HeadTarget::kUtilization)) {
    h.target = HeadTarget::kUtilization;
    GPUEST_RETURN_IF_ERROR(f.Get("metric", h.metric));
    GPUEST_RETURN_IF_ERROR(f.Get("edges", h.edges));
    GPUEST_RETURN_IF_ERROR(f.GetOptional("edges_source", h.edges_source));
    if (UtilizationMetricOf(h.metric) == v1::UTILIZATION_METRIC_UNSPECIFIED) {
      return f.Error("metric", absl::StrCat("is not a known metric: '", h.metric, "'"));
    }
  } else {
    return f.Error("target", "must be \"memory\" or \"utilization\"");
  }
  int classes = 0;
  GPUEST_RETURN_IF_ERROR(f.Get("classes", classes));
  GPUEST_RETURN_IF_ERROR(f.Finish());
  if (h.edges.size() < 2 || !std::is_sorted(h.edges.begin(), h.edges.end())) {
    return f.Error(h.memory() ? "edges_bytes" : "edges",
                   "must hold at least two edges in increasing order");
  }
  if (classes != h.classes()) {
    return f.Error("classes",
                   absl::StrCat("is ", classes, ", but the edges make ", h.classes()));
  }
  return h;
}

HeadSpec MemoryHead(int width_gib) {
  HeadSpec h;
  h.name = absl::StrCat("memory_", width_gib, "gib");
  h.target = HeadTarget::kMemory;
  h.width_bytes = static_cast<uint64_t>(width_gib) * common::kGiB;
  for (uint64_t e = 0; e <= kMemoryCeilingBytes; e += h.width_bytes) {
    h.edges.push_back(static_cast<double>(e));
  }
  return h;
}

HeadSpec UtilizationHead(const std::string& metric, std::vector<double> edges,
                         std::string edges_source) {
  HeadSpec h;
  h.name = absl::AsciiStrToLower(metric);
  h.target = HeadTarget::kUtilization;
  h.metric = metric;
  h.edges = std::move(edges);
  h.edges_source = std::move(edges_source);
  return h;
}

v1::UtilizationMetric UtilizationMetricOf(const std::string& metric) {
  if (metric == "SMACT") return v1::UTILIZATION_METRIC_SMACT;
  if (metric == "SMOCC") return v1::UTILIZATION_METRIC_SMOCC;
  if (metric == "GRACT") return v1::UTILIZATION_METRIC_GRACT;
  if (metric == "FP32A") return v1::UTILIZATION_METRIC_FP32A;
  if (metric == "DRAMA") return v1::UTILIZATION_METRIC_DRAMA;
  return v1::UTILIZATION_METRIC_UNSPECIFIED;
}

}  // namespace gpuest::gpumemnet
