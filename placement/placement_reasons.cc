#include "placement/placement_reasons.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/units.h"

namespace gpuest::placement {
namespace {

// The verdict in a reason: the probability and the operating point where the model
// has a verdict head.
std::string VerdictWords(const ContentionModel& contention, const SpeedPrediction& p,
                         bool bad) {
  if (!contention.HasVerdictHead()) {
    return bad ? absl::StrFormat("BAD, below %.2f", contention.bad_threshold)
               : "acceptable";
  }
  return absl::StrFormat(
      "P(below %.2f) %.2f, %s", contention.bad_threshold, p.bad_probability,
      bad ? absl::StrFormat("BAD (at or above %.3f)", contention.verdict_probability)
          : "acceptable");
}

// The jobs beside one, for its reason: the busiest few by name, the rest counted, so
// that a response grows with the jobs, not with their square.
std::string NeighbourWords(const std::vector<ResolvedJob>& jobs,
                           std::vector<size_t> others) {
  constexpr size_t kNamed = 3;
  std::stable_sort(others.begin(), others.end(), [&jobs](size_t a, size_t b) {
    return jobs[a].util.value > jobs[b].util.value;
  });
  std::string words;
  for (size_t k = 0; k < others.size() && k < kNamed; ++k) {
    absl::StrAppend(&words, k ? ", " : "", "'", jobs[others[k]].name, "'");
  }
  if (others.size() > kNamed) {
    double load = 0;
    for (size_t k = kNamed; k < others.size(); ++k) load += jobs[others[k]].util.value;
    absl::StrAppendFormat(&words, " and %d more jobs (utilization.gpu %.0f %% together)",
                          others.size() - kNamed, 100 * load);
  }
  return words;
}

// The jobs whose contention the reasons word one by one: the candidate and the slowest
// others, this many in all. The rest are counted in one reason (each one's figures are
// in the response's jobs), and a long name is said at most twice (its outcome and its
// reason).
constexpr size_t kJobsWordedEach = 8;

}  // namespace

std::string GibWords(double bytes) {
  return absl::StrFormat("%.2f GiB", common::InGiB(bytes));
}

std::string UtilizationSourceWords(v1::UtilizationSource source) {
  switch (source) {
    case v1::UTILIZATION_SOURCE_NVIDIA_SMI:
      return "measured by nvidia-smi";
    case v1::UTILIZATION_SOURCE_DCGM_GRACT:
      return "measured by DCGM (GRACT)";
    case v1::UTILIZATION_SOURCE_DCGM_SMACT:
      return "measured by DCGM (SMACT, mapped onto utilization.gpu)";
    case v1::UTILIZATION_SOURCE_ESTIMATE:
      return "estimated by gpuest (GRACT class), not measured";
    default:
      return "unknown, assumed to saturate the GPU";
  }
}

std::string MemoryFitWords(const MemoryFit& fit) {
  const std::string head =
      absl::StrFormat("needs %.2f GiB beside %.2f GiB used of %.2f GiB",
                      common::InGiB(fit.candidate_bytes), common::InGiB(fit.used_bytes),
                      common::InGiB(fit.capacity_bytes));
  return fit.fits
             ? absl::StrFormat("%s, %.2f GiB left", head,
                               common::InGiB(fit.headroom_bytes))
             : absl::StrFormat("%s, short by %.2f GiB", head,
                               common::InGiB(-static_cast<double>(fit.headroom_bytes)));
}

std::string TargetGpuWords(bool node_reported, const std::string& id,
                           const std::string& profile_id, uint64_t capacity_bytes) {
  return node_reported ? absl::StrCat("the node-reported GPU (", GibWords(capacity_bytes),
                                      ", a ", profile_id, "'s context size)")
                       : absl::StrCat(id, " (", GibWords(capacity_bytes), ")");
}

std::string NodeReportedUseReason(uint64_t reported_used_bytes, size_t existing_jobs,
                                  uint64_t existing_bytes) {
  return absl::StrCat("the node reports ", GibWords(reported_used_bytes), " in use; the ",
                      existing_jobs, " existing jobs listed hold ",
                      GibWords(static_cast<double>(existing_bytes)),
                      "; the larger counts as used (a job not yet started is not in the "
                      "node's figure)");
}

std::string SeveralGpusReason(const ResolvedJob& candidate) {
  return absl::StrCat("candidate '", candidate.name, "' runs on ", candidate.gpus,
                      " GPUs (its parallelism): this answers for one of them, holding "
                      "one rank; the job fits only where each of its ",
                      candidate.gpus,
                      " GPUs answers fits, and runs at the pace of its slowest");
}

std::string MemoryFitReason(const MemoryFit& fit, const ResolvedJob& candidate,
                            const std::string& gpu_words) {
  return absl::StrCat(fit.fits ? "fits: " : "does not fit: ", "candidate '",
                      candidate.name, "' (", candidate.requirement_basis, ") on ",
                      gpu_words, ": ", MemoryFitWords(fit),
                      "; each process pays its own CUDA context");
}

std::string NeedsCapReason(const ResolvedJob& job) {
  return absl::StrFormat(
      "safe only with a cap: '%s' has a cuDNN benchmark transient; uncapped, its "
      "first step can take the GPU's free memory, the others' headroom included. "
      "Cap it at its %s: HAMi nvidia.com/gpumem: %d, or "
      "torch.cuda.set_per_process_memory_fraction(%.3f), or "
      "torch.backends.cudnn.benchmark = False",
      job.name, GibWords(static_cast<double>(job.requirement_bytes)),
      job.cap.hami_gpumem_mib(), job.cap.per_process_memory_fraction());
}

void AddContentionReasons(const std::vector<ResolvedJob>& jobs,
                          const std::vector<SpeedPrediction>& predictions,
                          const ContentionModel& contention,
                          v1::CheckPlacementResponse& response) {
  const size_t candidate = jobs.size() - 1;
  std::vector<size_t> order(candidate);
  for (size_t i = 0; i < candidate; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return predictions[a].speed < predictions[b].speed;
  });
  const size_t worded = std::min(order.size(), kJobsWordedEach - 1);
  std::vector<size_t> chosen(order.begin(), order.begin() + worded);
  std::sort(chosen.begin(), chosen.end());  // In the request's order.
  chosen.push_back(candidate);
  for (size_t i : chosen) {
    const ResolvedJob& job = jobs[i];
    const SpeedPrediction& p = predictions[i];
    std::vector<size_t> others;
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (j != i) others.push_back(j);
    }
    response.add_reasons(absl::StrFormat(
        "'%s' (utilization.gpu %.0f %%, %s) predicted at %.2f of its speed alone "
        "(%.2f..%.2f) beside %s: %s",
        job.name, job.util.value * 100, UtilizationSourceWords(job.source), p.speed,
        p.low, p.high, NeighbourWords(jobs, others),
        VerdictWords(contention, p, contention.CalledBad(p))));
  }
  if (order.size() > worded) {
    int bad = 0;
    double slowest = 1, fastest = 0;
    for (size_t k = worded; k < order.size(); ++k) {
      const SpeedPrediction& p = predictions[order[k]];
      bad += contention.CalledBad(p) ? 1 : 0;
      slowest = std::min(slowest, p.speed);
      fastest = std::max(fastest, p.speed);
    }
    response.add_reasons(absl::StrFormat(
        "%d other jobs predicted at %.2f..%.2f of their speed alone, %d of them called "
        "BAD (each one's figures are in jobs)",
        order.size() - worded, slowest, fastest, bad));
  }
}

std::string MigSliceReason(const std::string& gpu_id) {
  return absl::StrCat(
      gpu_id,
      " is a MIG slice: jobs on the GPU's other slices do not contend with these (MIG "
      "isolates compute and memory), so none is predicted; the speeds above are for "
      "the jobs listed, sharing this slice");
}

std::string ManyJobsReason(size_t jobs) {
  return absl::StrCat(jobs,
                      " jobs on one GPU: each job's others count as one load (their "
                      "utilization summed, capped at 100 %); the model was fitted on "
                      "pairs only, so this is an extrapolation and the confidence is "
                      "lowered");
}

std::string GpuShortWords(int index, const std::string& profile_id, bool free_reported,
                          const MemoryFit& fit) {
  return absl::StrCat("GPU ", index, " (", profile_id,
                      free_reported ? "" : ", free not reported",
                      "): ", MemoryFitWords(fit));
}

}  // namespace gpuest::placement
