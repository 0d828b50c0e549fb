// File: placement_reasons.h
//
// The prose of a placement, apart from its arithmetic (placement_verdict.h): every
// reason PlacementEngine::CheckPlacement gives, and the words the scheduler extender
// gives for a GPU or a node that does not take a pod. One module, so that both say a
// thing one way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gpuest/v1/placement.pb.h"
#include "placement/contention_model.h"
#include "placement/memory_fit.h"
#include "placement/placement_job.h"

namespace gpuest::placement {

// "3.10 GiB".
std::string GibWords(double bytes);

// Where a job's utilization comes from: "measured by nvidia-smi", ...
std::string UtilizationSourceWords(v1::UtilizationSource source);

// The fit in words: "needs 3.10 GiB beside 30.00 GiB used of 32.00 GiB, short by 1.10
// GiB" (or ", 2.00 GiB left").
std::string MemoryFitWords(const MemoryFit& fit);

// The GPU a placement is judged on: "a100-40gb (40.00 GiB)", or the node-reported one
// with its catalog profile (whose context size it takes).
std::string TargetGpuWords(bool node_reported, const std::string& id,
                           const std::string& profile_id, uint64_t capacity_bytes);

// CheckPlacement's reasons, in the order it gives them.
std::string NodeReportedUseReason(uint64_t reported_used_bytes, size_t existing_jobs,
                                  uint64_t existing_bytes);
std::string SeveralGpusReason(const ResolvedJob& candidate);
std::string MemoryFitReason(const MemoryFit& fit, const ResolvedJob& candidate,
                            const std::string& gpu_words);
std::string NeedsCapReason(const ResolvedJob& job);
// A reason for the candidate and the slowest others (kJobsWordedEach in all), in the
// request's order, then one that counts the rest: the answer grows with the jobs, not
// their square. jobs: the existing ones, then the candidate.
void AddContentionReasons(const std::vector<ResolvedJob>& jobs,
                          const std::vector<SpeedPrediction>& predictions,
                          const ContentionModel& contention,
                          v1::CheckPlacementResponse& response);
std::string MigSliceReason(const std::string& gpu_id);
std::string ManyJobsReason(size_t jobs);

// The extender's words for one GPU of a node that is too full for the pod: "GPU 3
// (h100-80gb): needs ...".
std::string GpuShortWords(int index, const std::string& profile_id, bool free_reported,
                          const MemoryFit& fit);

}  // namespace gpuest::placement
