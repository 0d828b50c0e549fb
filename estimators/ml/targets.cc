#include "estimators/ml/targets.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpuest::ml {

int HeadSpec::classes() const {
  if (target == "memory") return static_cast<int>(edges.size());  // N bins + top.
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
  nlohmann::json j = {{"name", name}, {"target", target}, {"classes", classes()}};
  if (target == "memory") {
    j["width_bytes"] = width_bytes;
    j["width_gib"] = width_bytes / kGiB;
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

absl::StatusOr<HeadSpec> HeadSpec::FromJson(const nlohmann::json& j) {
  try {
    HeadSpec h;
    h.name = j.at("name").get<std::string>();
    h.target = j.at("target").get<std::string>();
    if (h.target == "memory") {
      h.width_bytes = j.at("width_bytes").get<uint64_t>();
      for (const auto& e : j.at("edges_bytes")) {
        h.edges.push_back(static_cast<double>(e.get<uint64_t>()));
      }
    } else if (h.target == "utilization") {
      h.metric = j.at("metric").get<std::string>();
      h.edges = j.at("edges").get<std::vector<double>>();
      h.edges_source = j.value("edges_source", "");
      if (UtilizationMetricOf(h.metric) == v1::UTILIZATION_METRIC_UNSPECIFIED) {
        return absl::InvalidArgumentError(
            absl::StrCat("head ", h.name, ": unknown metric '", h.metric, "'"));
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("head ", h.name, ": unknown target '", h.target, "'"));
    }
    if (h.edges.size() < 2 || !std::is_sorted(h.edges.begin(), h.edges.end()) ||
        (h.target == "memory" && h.width_bytes == 0) ||
        j.at("classes").get<int>() != h.classes()) {
      return absl::InvalidArgumentError(absl::StrCat("head ", h.name, ": bad bin edges"));
    }
    return h;
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("head: ", e.what()));
  }
}

HeadSpec MemoryHead(int width_gib) {
  HeadSpec h;
  h.name = absl::StrCat("memory_", width_gib, "gib");
  h.target = "memory";
  h.width_bytes = static_cast<uint64_t>(width_gib) * kGiB;
  for (uint64_t e = 0; e <= kMemoryCeilingBytes; e += h.width_bytes) {
    h.edges.push_back(static_cast<double>(e));
  }
  return h;
}

HeadSpec UtilizationHead(const std::string& metric, std::vector<double> edges,
                         std::string edges_source) {
  HeadSpec h;
  h.name = absl::AsciiStrToLower(metric);
  h.target = "utilization";
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

}  // namespace gpuest::ml
