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

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "estimators/engine.h"
#include "estimators/work_deadline.h"
#include "gpuest/v1/placement.pb.h"
#include "placement/contention_model.h"
#include "placement/placement_job.h"

namespace gpuest {

// The most jobs a CheckPlacement may list as already on the GPU (MIG slices and MPS
// clients included, a GPU holds a few dozen at most); more is refused, naming the bound.
inline constexpr int kMaxExistingJobs = 256;

// The models (the engine's registry and the contention model) can be replaced while
// calls run (the server's model reload): each call answers with the pair it started
// with, both replaced together.
class PlacementEngine {
 public:
  // The engine estimates jobs given by description, and its registry is replaced with
  // the contention model by ReplaceModels; it must outlive this object.
  PlacementEngine(Engine& engine, std::shared_ptr<const ContentionModel> contention)
      : engine_(engine), contention_(std::move(contention)) {}
  PlacementEngine(Engine& engine, ContentionModel contention)
      : PlacementEngine(engine,
                        std::make_shared<const ContentionModel>(std::move(contention))) {}

  // InvalidArgument names the offending field ("candidate.measured.gpu_util",
  // "existing[1].description.model.batch_size", "gpu.catalog_id"). server_latency_us
  // is left for the caller. Work past the deadline (a description's estimate, the next
  // job or GPU) stops: DeadlineExceeded or Cancelled, never a late answer.
  absl::StatusOr<v1::CheckPlacementResponse> CheckPlacement(
      const v1::CheckPlacementRequest& request,
      const WorkDeadline& deadline = WorkDeadline::Never()) const;
  // The same with models the caller took (models()), for a caller that answers with
  // several placements (the Kubernetes extender, per node) on one set.
  absl::StatusOr<v1::CheckPlacementResponse> CheckPlacement(
      const PlacementModels& models, const v1::CheckPlacementRequest& request,
      const WorkDeadline& deadline) const;
  absl::StatusOr<v1::RankGpusResponse> RankGpus(
      const v1::RankGpusRequest& request,
      const WorkDeadline& deadline = WorkDeadline::Never()) const;

  // The models that calls starting now answer with, taken together.
  PlacementModels models() const;
  // Calls that start from now on answer with these (Estimate calls with the registry);
  // calls in flight finish on the ones they started with. Both are replaced under one
  // lock, so that no placement sees one without the other. Returns those replaced.
  PlacementModels ReplaceModels(PlacementModels models);

 private:
  Engine& engine_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const ContentionModel> contention_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuest
