// File: placement_job.h
//
// One job of a placement request as the placement needs it: its requirement, the
// memory it holds or will hold (its own CUDA context included), and its utilization
// with a range, each with where it came from. A job is given by description (estimated
// here, for the target GPU), by an earlier estimate's figures, or by what the node
// measures.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/work_deadline.h"
#include "estimators/core/engine.h"
#include "estimators/core/gpu_profiles.h"
#include "gpuest/v1/placement.pb.h"
#include "placement/contention_model.h"

namespace gpuest::placement {

struct ResolvedJob {
  std::string name;
  // The requirement on the target GPU: a description's recommendation (its proto
  // memory_bytes), an earlier estimate's peak_bytes, or the memory measured in use.
  uint64_t requirement_bytes = 0;
  std::string requirement_basis;  // Where it came from, in words.
  std::string estimator_id;       // For a description: the recommended estimator.
  UtilizationRange util;
  v1::UtilizationSource source = v1::UTILIZATION_SOURCE_UNKNOWN;
  std::vector<v1::Warning> warnings;  // The description's estimate's.
  // For a description: how to hold it to requirement_bytes (cap.needed: it has a
  // transient that uncapped can take the GPU's free memory).
  v1::MemoryCap cap;
  // GPUs the job occupies (GpusPerJob of its description's layout); requirement_bytes
  // is then one rank's share, on each of them.
  uint64_t gpus = 1;
};

// field names the job in errors ("candidate", "existing[2]"). gpu is the target, from
// engine's catalog; its context is added to an estimate that leaves it out. A
// description is estimated by engine, within deadline: work it stops is
// DeadlineExceeded or Cancelled, the call's outcome. A measured job's utilization is
// read as contention's data was.
absl::StatusOr<ResolvedJob> ResolveJob(const v1::PlacementJob& job,
                                       const std::string& field,
                                       const core::GpuProfile& gpu,
                                       const core::Engine& engine,
                                       const ContentionModel& contention,
                                       const common::WorkDeadline& deadline);

// A job given by description is estimated for the GPU it is placed on (target): its
// description may name that GPU (catalog id, alias or nvidia-smi name) or none.
// Another GPU named is InvalidArgument naming <field>.gpu, never silently replaced.
// field names the description ("candidate.description", a pod's annotation).
absl::Status CheckDescriptionGpu(const v1::EstimateRequest& description,
                                 const std::string& field, const core::GpuProfile& target,
                                 const core::GpuProfiles& catalog);

// Nothing says how busy a job is: taken as saturating the GPU (the conservative
// point), over the whole range.
UtilizationRange UnknownUtilization();

// nvidia-smi's utilization.gpu (percent) of a job, taken as exact.
UtilizationRange MeasuredByNvidiaSmi(double percent);

// A utilization estimate's range on nvidia-smi's scale: the GRACT class's edges
// (GRACT reads as utilization.gpu), the point its probability-weighted midpoint.
// InvalidArgument (naming field) for a metric other than GRACT or a malformed class.
absl::StatusOr<UtilizationRange> UtilizationFromEstimate(
    const v1::UtilizationEstimate& estimate, const std::string& field);

}  // namespace gpuest::placement
