#include "placement/placement_engine.h"

#include <algorithm>
#include <memory>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "estimators/core/field_bounds.h"
#include "placement/memory_fit.h"
#include "placement/placement_job.h"
#include "placement/placement_verdict.h"

namespace gpuest {
namespace {

// How much a job's inputs are trusted, as a factor on the interval's coverage.
constexpr double kEstimatedTrust = 0.75;    // gpuest's utilization class, not measured.
constexpr double kUnknownTrust = 0.4;       // Nothing said how busy the job is.
constexpr double kExtrapolatedTrust = 0.7;  // Beside more than one other job.

std::string Gib(double bytes) { return absl::StrFormat("%.2f GiB", InGiB(bytes)); }

double Trust(v1::UtilizationSource source) {
  switch (source) {
    case v1::UTILIZATION_SOURCE_ESTIMATE:
      return kEstimatedTrust;
    case v1::UTILIZATION_SOURCE_UNKNOWN:
    case v1::UTILIZATION_SOURCE_UNSPECIFIED:
      return kUnknownTrust;
    default:
      return 1.0;
  }
}

std::string SourceWords(v1::UtilizationSource source) {
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

// The GPU a request names, with what the node reports in use (0 for a catalog GPU).
struct Target {
  const GpuProfile* profile = nullptr;  // For estimates and the context size.
  std::string id;
  uint64_t capacity_bytes = 0;
  uint64_t reported_used_bytes = 0;
  bool node_reported = false;
};

absl::StatusOr<Target> ResolveGpu(const v1::PlacementGpu& gpu, const GpuProfiles& gpus) {
  Target t;
  switch (gpu.gpu_case()) {
    case v1::PlacementGpu::kCatalogId:
      t.profile = gpus.Find(gpu.catalog_id());
      if (t.profile == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("gpu.catalog_id: unknown GPU '",
                                                       gpu.catalog_id().substr(0, 128),
                                                       "'; known: ", gpus.KnownIds()));
      }
      t.id = t.profile->id;
      t.capacity_bytes = t.profile->memory_bytes;
      return t;
    case v1::PlacementGpu::kNodeReported: {
      const v1::NodeReportedGpu& n = gpu.node_reported();
      GPUEST_RETURN_IF_ERROR(
          CheckField(kNodeTotalBytes, n.total_bytes(), "gpu.node_reported.total_bytes"));
      GPUEST_RETURN_IF_ERROR(
          CheckField(kNodeFreeBytes, n.free_bytes(), "gpu.node_reported.free_bytes"));
      if (n.free_bytes() > n.total_bytes()) {
        return absl::InvalidArgumentError(
            "gpu.node_reported.free_bytes: above total_bytes");
      }
      t.profile = n.model().empty() ? &gpus.Default() : gpus.Find(n.model());
      if (t.profile == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("gpu.node_reported.model: unknown GPU '",
                         n.model().substr(0, 128), "'; known: ", gpus.KnownIds()));
      }
      t.id = "node-reported";
      t.capacity_bytes = n.total_bytes();
      t.reported_used_bytes = n.total_bytes() - n.free_bytes();
      t.node_reported = true;
      return t;
    }
    case v1::PlacementGpu::GPU_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      "gpu: give a catalog_id or the node_reported total and free memory");
}

void AddWarnings(const std::vector<v1::Warning>& warnings,
                 google::protobuf::RepeatedPtrField<v1::Warning>* out,
                 std::set<std::string>& seen) {
  for (const v1::Warning& w : warnings) {
    if (seen.insert(absl::StrCat(w.code(), "|", w.estimator_id(), "|", w.message()))
            .second)
      *out->Add() = w;
  }
}

}  // namespace

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
// in the response's jobs), so that the answer grows with the jobs, not their square,
// and a long name is said at most twice (its outcome and its reason).
constexpr size_t kJobsWordedEach = 8;

// A reason for each worded job, in the request's order, then one that counts the rest.
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
        job.name, job.util.value * 100, SourceWords(job.source), p.speed, p.low, p.high,
        NeighbourWords(jobs, others),
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

// Reasons and outcomes name jobs: two jobs of one name would read as one, and a long
// name would be quoted in every reason.
absl::Status CheckJobNamesDistinct(const v1::CheckPlacementRequest& request) {
  absl::flat_hash_map<absl::string_view, std::string> seen;
  auto check = [&](const v1::PlacementJob& job, std::string field) -> absl::Status {
    if (job.name().size() > kMaxJobNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".name: ", job.name().size(), " bytes, more than ", kMaxJobNameBytes));
    }
    if (job.name().empty()) return absl::OkStatus();
    const auto [it, inserted] = seen.emplace(job.name(), field);
    if (inserted) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".name: '", job.name().substr(0, 128),
                     "' is already the name of ", it->second));
  };
  for (int i = 0; i < request.existing_size(); ++i) {
    GPUEST_RETURN_IF_ERROR(check(request.existing(i), absl::StrCat("existing[", i, "]")));
  }
  return check(request.candidate(), "candidate");
}

}  // namespace

absl::StatusOr<v1::CheckPlacementResponse> PlacementEngine::CheckPlacement(
    const v1::CheckPlacementRequest& request, const WorkDeadline& deadline) const {
  const ContentionModel& contention = *contention_;
  GPUEST_ASSIGN_OR_RETURN(const Target target,
                          ResolveGpu(request.gpu(), engine_.registry()->gpus()));
  if (!request.has_candidate()) return absl::InvalidArgumentError("candidate: missing");
  // No GPU holds more than a few dozen training jobs.
  if (request.existing_size() > kMaxExistingJobs) {
    return absl::InvalidArgumentError(absl::StrCat("existing: ", request.existing_size(),
                                                   " jobs exceed the limit of ",
                                                   kMaxExistingJobs, " jobs on one GPU"));
  }
  GPUEST_RETURN_IF_ERROR(CheckJobNamesDistinct(request));

  std::vector<ResolvedJob> jobs;
  for (int i = 0; i < request.existing_size(); ++i) {
    GPUEST_RETURN_IF_ERROR(deadline.Check());
    GPUEST_ASSIGN_OR_RETURN(
        ResolvedJob job,
        ResolveJob(request.existing(i), absl::StrCat("existing[", i, "]"),
                   *target.profile, engine_, contention, deadline));
    jobs.push_back(std::move(job));
  }
  GPUEST_RETURN_IF_ERROR(deadline.Check());
  GPUEST_ASSIGN_OR_RETURN(ResolvedJob candidate,
                          ResolveJob(request.candidate(), "candidate", *target.profile,
                                     engine_, contention, deadline));
  jobs.push_back(std::move(candidate));

  v1::CheckPlacementResponse response;
  std::vector<uint64_t> existing_bytes;
  uint64_t existing_sum = 0;
  for (size_t i = 0; i + 1 < jobs.size(); ++i) {
    existing_bytes.push_back(jobs[i].memory_bytes);
    existing_sum = SaturatingAdd(existing_sum, jobs[i].memory_bytes);
  }
  const MemoryFit fit = FitMemory(target.capacity_bytes, existing_bytes,
                                  jobs.back().memory_bytes, target.reported_used_bytes);
  response.set_gpu(target.id);
  response.set_capacity_bytes(fit.capacity_bytes);
  response.set_used_bytes(fit.used_bytes);
  response.set_candidate_bytes(fit.candidate_bytes);
  response.set_fits(fit.fits);
  response.set_headroom_bytes(fit.headroom_bytes);
  response.set_contention_model_version(contention.version);
  response.set_bad_probability_threshold(
      contention.HasVerdictHead() ? contention.verdict_probability : 0.5);
  response.set_models_version(engine_.registry()->models_version());

  const std::string gpu_words =
      target.node_reported
          ? absl::StrCat("the node-reported GPU (", Gib(fit.capacity_bytes), ", a ",
                         target.profile->id, "'s context size)")
          : absl::StrCat(target.id, " (", Gib(fit.capacity_bytes), ")");
  if (target.node_reported) {
    response.add_reasons(absl::StrCat(
        "the node reports ", Gib(target.reported_used_bytes), " in use; the ",
        existing_bytes.size(), " existing jobs listed hold ",
        Gib(static_cast<double>(existing_sum)),
        "; the larger counts as used (a job not yet started is not in the node's "
        "figure)"));
  }
  const ResolvedJob& candidate_job = jobs.back();
  response.set_candidate_gpus(candidate_job.gpus);
  if (candidate_job.gpus > 1) {
    response.add_reasons(absl::StrCat(
        "candidate '", candidate_job.name, "' runs on ", candidate_job.gpus,
        " GPUs (its parallelism): this answers for one of them, holding one rank; the "
        "job fits only where each of its ",
        candidate_job.gpus, " GPUs answers fits, and runs at the pace of its slowest"));
  }
  response.add_reasons(absl::StrCat(fit.fits ? "fits: " : "does not fit: ", "candidate '",
                                    jobs.back().name, "' (", jobs.back().memory_basis,
                                    ") on ", gpu_words, ": ", MemoryFitWords(fit),
                                    "; each process pays its own CUDA context"));

  // Packed by the requirement: beside others, that holds only with each transient
  // capped.
  if (fit.fits && jobs.size() > 1) {
    for (const ResolvedJob& job : jobs) {
      if (!job.cap.needed()) continue;
      response.add_needs_cap(job.name);
      response.add_reasons(absl::StrFormat(
          "safe only with a cap: '%s' has a cuDNN benchmark transient; uncapped, its "
          "first step can take the GPU's free memory, the others' headroom included. "
          "Cap it at its %s: HAMi nvidia.com/gpumem: %d, or "
          "torch.cuda.set_per_process_memory_fraction(%.3f), or "
          "torch.backends.cudnn.benchmark = False",
          job.name, Gib(static_cast<double>(job.memory_bytes)), job.cap.hami_gpumem_mib(),
          job.cap.per_process_memory_fraction()));
    }
  }

  ContentionTally tally;
  std::vector<SpeedPrediction> predictions(jobs.size());
  std::set<std::string> seen;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const ResolvedJob& job = jobs[i];
    AddWarnings(job.warnings, response.mutable_warnings(), seen);
    std::vector<UtilizationRange> others;
    double trust = Trust(job.source);
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (j == i) continue;
      others.push_back(jobs[j].util);
      trust = std::min(trust, Trust(jobs[j].source));
    }
    const SpeedPrediction p = contention.Predict(job.util, others);
    predictions[i] = p;
    v1::JobOutcome& o = *response.add_jobs();
    o.set_name(job.name);
    o.set_candidate(i + 1 == jobs.size());
    o.set_memory_bytes(job.memory_bytes);
    o.set_memory_basis(job.memory_basis);
    o.set_gpu_util(job.util.value);
    o.set_gpu_util_low(job.util.low);
    o.set_gpu_util_high(job.util.high);
    o.set_utilization_source(job.source);
    o.set_predicted_speed(p.speed);
    o.set_speed_low(p.low);
    o.set_speed_high(p.high);
    o.set_extrapolated(p.extrapolated);
    if (others.empty()) {
      o.set_verdict(v1::CONTENTION_VERDICT_ALONE);
      o.set_confidence(1.0);
      continue;
    }
    const bool bad = contention.CalledBad(p);
    o.set_bad_probability(p.bad_probability);
    o.set_verdict(bad ? v1::CONTENTION_VERDICT_BAD : v1::CONTENTION_VERDICT_ACCEPTABLE);
    o.set_confidence(contention.interval_coverage * trust *
                     (p.extrapolated ? kExtrapolatedTrust : 1.0));
    tally.Add(contention, p);
  }
  if (jobs.size() > 1) AddContentionReasons(jobs, predictions, contention, response);
  if (IsMigProfile(*target.profile) && !target.node_reported) {
    // MIG partitions the SMs and memory: other slices' jobs do not slow these. The
    // contention model (fitted on whole GPUs) applies only among the jobs listed, which
    // share this slice.
    response.add_reasons(absl::StrCat(
        target.id,
        " is a MIG slice: jobs on the GPU's other slices do not contend with these (MIG "
        "isolates compute and memory), so none is predicted; the speeds above are for "
        "the jobs listed, sharing this slice"));
  }
  if (jobs.size() > 2) {
    response.add_reasons(absl::StrCat(
        jobs.size(),
        " jobs on one GPU: each job's others count as one load (their "
        "utilization summed, capped at 100 %); the model was fitted on pairs "
        "only, so this is an extrapolation and the confidence is lowered"));
  }
  response.set_verdict(tally.verdict);
  response.set_worst_predicted_speed(tally.worst_speed);
  return response;
}

absl::StatusOr<v1::RankGpusResponse> PlacementEngine::RankGpus(
    const v1::RankGpusRequest& request, const WorkDeadline& deadline) const {
  if (!request.has_job()) return absl::InvalidArgumentError("job: missing");
  v1::RankGpusResponse response;
  response.set_models_version(engine_.registry()->models_version());
  std::set<std::string> seen;
  for (const GpuProfile& gpu : engine_.registry()->gpus().All()) {
    // Each GPU is one more estimate: none starts past the deadline.
    GPUEST_RETURN_IF_ERROR(deadline.Check());
    GPUEST_ASSIGN_OR_RETURN(
        const ResolvedJob job,
        ResolveJob(request.job(), "job", gpu, engine_, *contention_, deadline));
    AddWarnings(job.warnings, response.mutable_warnings(), seen);
    response.set_gpus_needed(job.gpus);
    v1::GpuRanking& r = *response.add_gpus();
    r.set_gpu(gpu.id);
    r.set_name(gpu.name);
    r.set_mig(IsMigProfile(gpu));
    r.set_capacity_bytes(gpu.memory_bytes);
    r.set_peak_bytes(job.memory_bytes);
    r.set_estimator_id(job.estimator_id);
    r.set_fits(job.memory_bytes <= gpu.memory_bytes);
    r.set_headroom_bytes(SignedHeadroom(gpu.memory_bytes, job.memory_bytes));
    r.set_needs_cap(job.cap.needed());
  }
  std::stable_sort(response.mutable_gpus()->begin(), response.mutable_gpus()->end(),
                   [](const v1::GpuRanking& a, const v1::GpuRanking& b) {
                     if (a.fits() != b.fits()) return a.fits() > b.fits();
                     if (a.fits()) return a.headroom_bytes() < b.headroom_bytes();
                     return a.headroom_bytes() > b.headroom_bytes();
                   });
  return response;
}

}  // namespace gpuest
