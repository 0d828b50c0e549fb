// File: targets.h
//
// What a GPUMemNet network's heads predict, shared by the trainer and the served
// estimator: memory as GiB bins over [0, 40 GiB) plus one open top class ("more than
// the A100's 40 GB": the runs that crashed out of memory), and utilization metrics as
// classes over bin edges. Stored in the manifest, in logits order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/strict_json.h"
#include "common/units.h"
#include "gpuest/v1/estimate.pb.h"
#include "nlohmann/json.hpp"

namespace gpuest::gpumemnet {

// The measured GPU (A100 40GB): bins cover [0, 40 GiB); above is the top class.
constexpr uint64_t kMemoryCeilingBytes = 40 * common::kGiB;
constexpr char kTopClassLabel[] = "> 40 GiB (did not fit the A100 40GB)";

// What a head predicts: peak memory in bins, or one utilization metric in classes.
enum class HeadTarget { kMemory, kUtilization };

// "memory", "utilization": the words the manifest uses.
const char* HeadTargetName(HeadTarget target);

struct HeadSpec {
  std::string name;  // "memory_2gib", "smact".
  HeadTarget target = HeadTarget::kMemory;
  // Memory: the bin width, and edges in bytes [0, w, 2w, ..., 40 GiB]; class k < N is
  // [edges[k], edges[k+1]), class N (the last) is the open top class.
  uint64_t width_bytes = 0;
  // Utilization: the DCGM metric ("SMACT"), edges [0, a, b, 1] (class k is
  // [edges[k], edges[k+1]), the last class closed), and where the edges come from.
  std::string metric;
  std::string edges_source;
  std::vector<double> edges;

  int classes() const;
  // Class of a measurement: memory in bytes with whether the run crashed out of memory,
  // or a utilization value in [0, 1]; -1 when there is none (negative: not measured).
  int MemoryClass(double bytes, bool oom) const;
  int UtilizationClass(double value) const;

  bool memory() const { return target == HeadTarget::kMemory; }

  nlohmann::json ToJson() const;
  // Every key read strictly; the bins must agree with the classes the head declares.
  static absl::StatusOr<HeadSpec> FromJson(
      common::strict_json::Fields<nlohmann::json>& f);
};

HeadSpec MemoryHead(int width_gib);
HeadSpec UtilizationHead(const std::string& metric, std::vector<double> edges,
                         std::string edges_source);

// "SMACT" -> UTILIZATION_METRIC_SMACT; UNSPECIFIED when unknown.
v1::UtilizationMetric UtilizationMetricOf(const std::string& metric);

}  // namespace gpuest::gpumemnet
