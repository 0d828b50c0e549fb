// File: placement_engine.h
//
// Answers CheckPlacement and RankGpus (proto/gpuest/v1/placement.proto): resolves the
// GPU (catalog id, alias or nvidia-smi name, MIG profiles included; or a node's total
// and free), turns each job (description, earlier estimate, or measurement) into its
// memory and utilization, checks the memory fit (memory_fit.h) and predicts every
// job's speed beside the others (contention_model.h). The gRPC service is a thin shell
// around it; the Kubernetes extender and the replay call it directly.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "common/work_deadline.h"
#include "estimators/core/engine.h"
#include "gpuest/v1/placement.pb.h"
#include "placement/contention_model.h"
#include "placement/placement_job.h"

namespace gpuest::placement {

// The most jobs a CheckPlacement may list as already on the GPU (MIG slices and MPS
// clients included, a GPU holds a few dozen at most); more is refused, naming the bound.
inline constexpr int kMaxExistingJobs = 256;
// A job's name is for people and reasons: a pod's namespace/name is at most 317 bytes
// in Kubernetes (63 + 1 + 253); longer names only grow every reason that quotes them.
inline constexpr size_t kMaxJobNameBytes = 320;

// Immutable, like the Engine it estimates with: the server's model reload builds a new
// model set (model_set.h) rather than changing one in use.
class PlacementEngine {
 public:
  // The engine estimates jobs given by description and its registry is the GPU
  // catalog; it must outlive this object.
  PlacementEngine(const core::Engine& engine,
                  std::shared_ptr<const ContentionModel> contention)
      : engine_(engine), contention_(std::move(contention)) {}
  PlacementEngine(const core::Engine& engine, ContentionModel contention)
      : PlacementEngine(engine,
                        std::make_shared<const ContentionModel>(std::move(contention))) {}

  // InvalidArgument names the offending field ("candidate.measured.gpu_util",
  // "existing[1].description.model.batch_size", "gpu.catalog_id"). server_latency_us
  // is left for the caller. Work past the deadline (a description's estimate, the next
  // job or GPU) stops: DeadlineExceeded or Cancelled, never a late answer.
  absl::StatusOr<v1::CheckPlacementResponse> CheckPlacement(
      const v1::CheckPlacementRequest& request,
      const common::WorkDeadline& deadline = common::WorkDeadline::Never()) const;
  absl::StatusOr<v1::RankGpusResponse> RankGpus(
      const v1::RankGpusRequest& request,
      const common::WorkDeadline& deadline = common::WorkDeadline::Never()) const;

  const core::Engine& engine() const { return engine_; }
  const ContentionModel& contention() const { return *contention_; }

 private:
  const core::Engine& engine_;
  const std::shared_ptr<const ContentionModel> contention_;
};

}  // namespace gpuest::placement
