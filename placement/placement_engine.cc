#include "placement/placement_engine.h"

#include <algorithm>
#include <memory>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "estimators/core/field_bounds.h"
#include "placement/memory_fit.h"
#include "placement/placement_job.h"
#include "placement/placement_reasons.h"
#include "placement/placement_verdict.h"

namespace gpuest::placement {
namespace {

// How much a job's inputs are trusted, as a factor on the interval's coverage.
constexpr double kEstimatedTrust = 0.75;    // gpuest's utilization class, not measured.
constexpr double kUnknownTrust = 0.4;       // Nothing said how busy the job is.
constexpr double kExtrapolatedTrust = 0.7;  // Beside more than one other job.

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

// The GPU a request names, with what the node reports in use (0 for a catalog GPU).
struct Target {
  const core::GpuProfile* profile = nullptr;  // For estimates and the context size.
  std::string id;
  uint64_t capacity_bytes = 0;
  uint64_t reported_used_bytes = 0;
  bool node_reported = false;
};

absl::StatusOr<Target> ResolveGpu(const v1::PlacementGpu& gpu,
                                  const core::GpuProfiles& gpus) {
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
      GPUEST_RETURN_IF_ERROR(core::CheckField(core::kNodeTotalBytes, n.total_bytes(),
                                              "gpu.node_reported.total_bytes"));
      GPUEST_RETURN_IF_ERROR(core::CheckField(core::kNodeFreeBytes, n.free_bytes(),
                                              "gpu.node_reported.free_bytes"));
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

// The request's jobs before any is resolved: a candidate, not too many existing ones,
// names distinct.
absl::Status CheckJobList(const v1::CheckPlacementRequest& request) {
  if (!request.has_candidate()) return absl::InvalidArgumentError("candidate: missing");
  // No GPU holds more than a few dozen training jobs.
  if (request.existing_size() > kMaxExistingJobs) {
    return absl::InvalidArgumentError(absl::StrCat("existing: ", request.existing_size(),
                                                   " jobs exceed the limit of ",
                                                   kMaxExistingJobs, " jobs on one GPU"));
  }
  return CheckJobNamesDistinct(request);
}

// The existing jobs, then the candidate, each resolved for gpu; none starts past the
// deadline.
absl::StatusOr<std::vector<ResolvedJob>> ResolveJobs(
    const v1::CheckPlacementRequest& request, const core::GpuProfile& gpu,
    const core::Engine& engine, const ContentionModel& contention,
    const common::WorkDeadline& deadline) {
  std::vector<ResolvedJob> jobs;
  for (int i = 0; i < request.existing_size(); ++i) {
    GPUEST_RETURN_IF_ERROR(deadline.Check());
    GPUEST_ASSIGN_OR_RETURN(
        ResolvedJob job,
        ResolveJob(request.existing(i), absl::StrCat("existing[", i, "]"), gpu, engine,
                   contention, deadline));
    jobs.push_back(std::move(job));
  }
  GPUEST_RETURN_IF_ERROR(deadline.Check());
  GPUEST_ASSIGN_OR_RETURN(
      ResolvedJob candidate,
      ResolveJob(request.candidate(), "candidate", gpu, engine, contention, deadline));
  jobs.push_back(std::move(candidate));
  return jobs;
}

// The memory fit of jobs (the existing ones, then the candidate) on target, into
// response with its reasons.
MemoryFit AddMemoryFit(const Target& target, const std::vector<ResolvedJob>& jobs,
                       v1::CheckPlacementResponse& response) {
  std::vector<uint64_t> existing_bytes;
  uint64_t existing_sum = 0;
  for (size_t i = 0; i + 1 < jobs.size(); ++i) {
    existing_bytes.push_back(jobs[i].requirement_bytes);
    existing_sum = common::SaturatingAdd(existing_sum, jobs[i].requirement_bytes);
  }
  const MemoryFit fit =
      FitMemory(target.capacity_bytes, existing_bytes, jobs.back().requirement_bytes,
                target.reported_used_bytes);
  response.set_gpu(target.id);
  response.set_capacity_bytes(fit.capacity_bytes);
  response.set_used_bytes(fit.used_bytes);
  response.set_candidate_bytes(fit.candidate_bytes);
  response.set_fits(fit.fits);
  response.set_headroom_bytes(fit.headroom_bytes);
  if (target.node_reported) {
    response.add_reasons(NodeReportedUseReason(target.reported_used_bytes,
                                               existing_bytes.size(), existing_sum));
  }
  const ResolvedJob& candidate = jobs.back();
  response.set_candidate_gpus(candidate.gpus);
  if (candidate.gpus > 1) response.add_reasons(SeveralGpusReason(candidate));
  response.add_reasons(
      MemoryFitReason(fit, candidate,
                      TargetGpuWords(target.node_reported, target.id, target.profile->id,
                                     fit.capacity_bytes)));
  return fit;
}

// One job's outcome beside the others (its prediction p, trust the least trusted
// input's).
void SetOutcome(const ResolvedJob& job, bool candidate, const SpeedPrediction& p,
                bool alone, double trust, const ContentionModel& contention,
                v1::JobOutcome& o) {
  o.set_name(job.name);
  o.set_candidate(candidate);
  // The requirement, by JobOutcome's names.
  o.set_memory_bytes(job.requirement_bytes);
  o.set_memory_basis(job.requirement_basis);
  o.set_gpu_util(job.util.value);
  o.set_gpu_util_low(job.util.low);
  o.set_gpu_util_high(job.util.high);
  o.set_utilization_source(job.source);
  o.set_predicted_speed(p.speed);
  o.set_speed_low(p.low);
  o.set_speed_high(p.high);
  o.set_extrapolated(p.extrapolated);
  if (alone) {
    o.set_verdict(v1::CONTENTION_VERDICT_ALONE);
    o.set_confidence(1.0);
    return;
  }
  const bool bad = contention.CalledBad(p);
  o.set_bad_probability(p.bad_probability);
  o.set_verdict(bad ? v1::CONTENTION_VERDICT_BAD : v1::CONTENTION_VERDICT_ACCEPTABLE);
  o.set_confidence(contention.interval_coverage * trust *
                   (p.extrapolated ? kExtrapolatedTrust : 1.0));
}

// Each job's speed predicted beside the others, into response (its outcome, its
// estimate's warnings once, the contention reasons); the verdict over them all.
ContentionTally AddJobOutcomes(const std::vector<ResolvedJob>& jobs,
                               const ContentionModel& contention,
                               v1::CheckPlacementResponse& response) {
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
    SetOutcome(job, i + 1 == jobs.size(), p, others.empty(), trust, contention,
               *response.add_jobs());
    if (!others.empty()) tally.Add(contention, p);
  }
  if (jobs.size() > 1) AddContentionReasons(jobs, predictions, contention, response);
  return tally;
}

}  // namespace

absl::StatusOr<v1::CheckPlacementResponse> PlacementEngine::CheckPlacement(
    const v1::CheckPlacementRequest& request,
    const common::WorkDeadline& deadline) const {
  const ContentionModel& contention = *contention_;
  GPUEST_ASSIGN_OR_RETURN(const Target target,
                          ResolveGpu(request.gpu(), engine_.registry()->gpus()));
  GPUEST_RETURN_IF_ERROR(CheckJobList(request));
  GPUEST_ASSIGN_OR_RETURN(
      const std::vector<ResolvedJob> jobs,
      ResolveJobs(request, *target.profile, engine_, contention, deadline));

  v1::CheckPlacementResponse response;
  response.set_contention_model_version(contention.version);
  response.set_bad_probability_threshold(
      contention.HasVerdictHead() ? contention.verdict_probability : 0.5);
  response.set_models_version(engine_.registry()->models_version());
  const MemoryFit fit = AddMemoryFit(target, jobs, response);
  // Packed by the requirement: beside others, that holds only with each transient
  // capped.
  if (fit.fits && jobs.size() > 1) {
    for (const ResolvedJob& job : jobs) {
      if (!job.cap.needed()) continue;
      response.add_needs_cap(job.name);
      response.add_reasons(NeedsCapReason(job));
    }
  }
  const ContentionTally tally = AddJobOutcomes(jobs, contention, response);
  if (core::IsMigProfile(*target.profile) && !target.node_reported) {
    // MIG partitions the SMs and memory: other slices' jobs do not slow these. The
    // contention model (fitted on whole GPUs) applies only among the jobs listed, which
    // share this slice.
    response.add_reasons(MigSliceReason(target.id));
  }
  if (jobs.size() > 2) response.add_reasons(ManyJobsReason(jobs.size()));
  response.set_verdict(tally.verdict);
  response.set_worst_predicted_speed(tally.worst_speed);
  return response;
}

absl::StatusOr<v1::RankGpusResponse> PlacementEngine::RankGpus(
    const v1::RankGpusRequest& request, const common::WorkDeadline& deadline) const {
  if (!request.has_job()) return absl::InvalidArgumentError("job: missing");
  v1::RankGpusResponse response;
  response.set_models_version(engine_.registry()->models_version());
  const core::GpuProfiles& catalog = engine_.registry()->gpus();
  std::set<std::string> only;  // Catalog ids; empty: all.
  for (int i = 0; i < request.gpus_size(); ++i) {
    const core::GpuProfile* named = catalog.Find(request.gpus(i));
    if (named == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("gpus[", i, "]: '", request.gpus(i).substr(0, 128),
                       "' is not in the catalog; known: ", catalog.KnownIds()));
    }
    only.insert(named->id);
  }
  std::set<std::string> seen;
  for (const core::GpuProfile& gpu : catalog.All()) {
    if (!only.empty() && only.count(gpu.id) == 0) continue;
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
    for (const std::string& alias : gpu.aliases) r.add_aliases(alias);
    r.set_mig(core::IsMigProfile(gpu));
    r.set_capacity_bytes(gpu.memory_bytes);
    r.set_peak_bytes(job.requirement_bytes);  // GpuRanking's name for it.
    r.set_estimator_id(job.estimator_id);
    r.set_fits(job.requirement_bytes <= gpu.memory_bytes);
    r.set_headroom_bytes(common::SignedHeadroom(gpu.memory_bytes, job.requirement_bytes));
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

}  // namespace gpuest::placement
