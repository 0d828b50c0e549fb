#include "placement/placement_verdict.h"

#include <algorithm>

namespace gpuest::placement {

void ContentionTally::Add(const ContentionModel& contention, const SpeedPrediction& p) {
  worst_speed = std::min(worst_speed, p.speed);
  if (contention.CalledBad(p)) {
    verdict = v1::CONTENTION_VERDICT_BAD;
  } else if (verdict == v1::CONTENTION_VERDICT_ALONE) {
    verdict = v1::CONTENTION_VERDICT_ACCEPTABLE;
  }
}

GpuJudgement JudgeReportedGpu(const ContentionModel& contention,
                              uint64_t candidate_requirement_bytes,
                              const UtilizationRange& candidate_util,
                              uint64_t total_bytes, uint64_t free_bytes,
                              const UtilizationRange& running) {
  GpuJudgement j;
  const uint64_t in_use = total_bytes - std::min(free_bytes, total_bytes);
  // What runs there holds what the node reports in use: FitMemory's reported use.
  j.fit = FitMemory(total_bytes, {}, candidate_requirement_bytes, in_use);
  if (in_use > 0) {  // Something runs there: each of the two beside the other.
    j.contention.Add(contention,
                     contention.PredictPoint(running, CombinedLoad({candidate_util})));
    j.contention.Add(contention,
                     contention.PredictPoint(candidate_util, CombinedLoad({running})));
  }
  return j;
}

}  // namespace gpuest::placement
