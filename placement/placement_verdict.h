// File: placement_verdict.h
//
// The arithmetic of a placement, apart from the prose that explains it: the memory fit
// and the contention verdict over the jobs sharing a GPU. PlacementEngine::CheckPlacement
// writes its response from these and its reasons with placement_reasons.h; the scheduler
// extender judges every GPU of a node with them alone (no message, no text, nothing
// allocated per GPU) and words only a GPU that fails, with placement_reasons.h too.
#pragma once

#include <cstdint>
#include <string>

#include "gpuest/v1/placement.pb.h"
#include "placement/contention_model.h"
#include "placement/memory_fit.h"

namespace gpuest::placement {

// A placement's contention verdict over its jobs: BAD where any job is called bad,
// else ACCEPTABLE where any shares the GPU, else ALONE; and the slowest predicted speed.
struct ContentionTally {
  v1::ContentionVerdict verdict = v1::CONTENTION_VERDICT_ALONE;
  double worst_speed = 1;

  // One job's prediction beside the others (never for a job alone).
  void Add(const ContentionModel& contention, const SpeedPrediction& p);
};

struct GpuJudgement {
  MemoryFit fit;
  ContentionTally contention;
};

// The candidate (its requirement and utilization) on a GPU whose node reports its total
// and free memory and how busy what runs there keeps it (running: UnknownUtilization()
// where the node does not say): what CheckPlacement answers for that node_reported GPU
// with what runs there listed as one job holding total - free, and the candidate.
GpuJudgement JudgeReportedGpu(const ContentionModel& contention,
                              uint64_t candidate_requirement_bytes,
                              const UtilizationRange& candidate_util,
                              uint64_t total_bytes, uint64_t free_bytes,
                              const UtilizationRange& running);

}  // namespace gpuest::placement
