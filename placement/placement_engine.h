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

namespace gpuest {

// The contention model can be replaced while calls run (the server's model reload), as
// the engine's registry can: each call answers with the model it started with.
class PlacementEngine {
 public:
  // The engine estimates jobs given by description; it must outlive this object.
  PlacementEngine(const Engine& engine, std::shared_ptr<const ContentionModel> contention)
      : engine_(engine), contention_(std::move(contention)) {}
  PlacementEngine(const Engine& engine, ContentionModel contention)
      : PlacementEngine(engine,
                        std::make_shared<const ContentionModel>(std::move(contention))) {}

  // InvalidArgument names the offending field ("candidate.measured.gpu_util",
  // "existing[1].description.model.batch_size", "gpu.catalog_id"). server_latency_us
  // is left for the caller. Work past the deadline (a description's estimate, the next
  // job or GPU) stops: DeadlineExceeded or Cancelled, never a late answer.
  absl::StatusOr<v1::CheckPlacementResponse> CheckPlacement(
      const v1::CheckPlacementRequest& request,
      const WorkDeadline& deadline = WorkDeadline::Never()) const;
  absl::StatusOr<v1::RankGpusResponse> RankGpus(
      const v1::RankGpusRequest& request,
      const WorkDeadline& deadline = WorkDeadline::Never()) const;

  // The contention model that calls starting now answer with.
  std::shared_ptr<const ContentionModel> contention() const;
  // Calls that start from now on answer with this model; calls in flight finish on the
  // one they started with. Returns the model it replaces.
  std::shared_ptr<const ContentionModel> ReplaceContention(
      std::shared_ptr<const ContentionModel> contention);

 private:
  const Engine& engine_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const ContentionModel> contention_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpuest
