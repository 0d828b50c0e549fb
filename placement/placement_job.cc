#include "placement/placement_job.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "estimators/core/field_bounds.h"
#include "estimators/core/job_gpus.h"

namespace gpuest::placement {
namespace {

// GRACT against utilization.gpu on GPUMemNet's A100 rows: 3 to 5 points apart on
// average (docs/contention.md); a GRACT reading's range is +- this.
constexpr double kGractSpread = 0.05;
// A probability below this does not widen an estimate's range.
constexpr double kClassMass = 0.05;

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

UtilizationRange Around(double value, double spread) {
  return {value, std::max(0.0, value - spread), std::min(1.0, value + spread)};
}

absl::StatusOr<UtilizationRange> FromMeasured(const v1::MeasuredJob& m,
                                              const std::string& field,
                                              const ContentionModel& contention) {
  const bool percent = m.source() == v1::UTILIZATION_SOURCE_NVIDIA_SMI;
  if (!percent && m.source() != v1::UTILIZATION_SOURCE_DCGM_GRACT &&
      m.source() != v1::UTILIZATION_SOURCE_DCGM_SMACT) {
    return Invalid(field + ".source",
                   "a measurement comes from NVIDIA_SMI (percent), DCGM_GRACT or "
                   "DCGM_SMACT (fractions)");
  }
  GPUEST_RETURN_IF_ERROR(
      core::CheckField(core::kMeasuredGpuUtil, m.gpu_util(), field + ".gpu_util"));
  GPUEST_RETURN_IF_ERROR(
      core::CheckField(core::kMeasuredMemUtil, m.mem_util(), field + ".mem_util"));
  const double top = percent ? 100.0 : 1.0;
  for (const auto& [name, v] : {std::pair<const char*, double>{"gpu_util", m.gpu_util()},
                                {"mem_util", m.mem_util()}}) {
    if (!std::isfinite(v) || v < 0 || v > top) {
      return Invalid(absl::StrCat(field, ".", name),
                     absl::StrFormat("%g is outside 0..%g for source %s", v, top,
                                     v1::UtilizationSource_Name(m.source())));
    }
  }
  if (percent) return MeasuredByNvidiaSmi(m.gpu_util());
  if (m.source() == v1::UTILIZATION_SOURCE_DCGM_GRACT)
    return Around(m.gpu_util(), kGractSpread);
  return Around(contention.SmactToUtil(m.gpu_util()), contention.smact_mae);
}

// The response's GRACT estimate with the highest confidence, if any.
const v1::UtilizationEstimate* GractOf(const v1::EstimateResponse& response) {
  const v1::UtilizationEstimate* best = nullptr;
  for (const v1::EstimatorResult& r : response.results()) {
    for (const v1::UtilizationEstimate& u : r.utilization()) {
      if (u.metric() == v1::UTILIZATION_METRIC_GRACT &&
          (best == nullptr || u.confidence() > best->confidence())) {
        best = &u;
      }
    }
  }
  return best;
}

}  // namespace

absl::StatusOr<UtilizationRange> UtilizationFromEstimate(
    const v1::UtilizationEstimate& estimate, const std::string& field) {
  if (estimate.metric() != v1::UTILIZATION_METRIC_GRACT) {
    return Invalid(field + ".metric",
                   "only a GRACT estimate reads as utilization.gpu; got " +
                       v1::UtilizationMetric_Name(estimate.metric()));
  }
  const int classes = estimate.probabilities_size();
  if (classes == 0 || estimate.bin_edges_size() != classes + 1) {
    return Invalid(field + ".bin_edges", "needs one more edge than probabilities");
  }
  if (classes > core::kUtilPredictedClass.max + 1) {
    return Invalid(
        field + ".probabilities",
        absl::StrCat("at most ", core::kUtilPredictedClass.max + 1, " classes"));
  }
  GPUEST_RETURN_IF_ERROR(core::CheckField(core::kUtilPredictedClass,
                                          int64_t{estimate.predicted_class()},
                                          field + ".predicted_class"));
  GPUEST_RETURN_IF_ERROR(core::CheckField(core::kUtilConfidence, estimate.confidence(),
                                          field + ".confidence"));
  for (int k = 0; k <= classes; ++k) {
    const double e = estimate.bin_edges(k);
    GPUEST_RETURN_IF_ERROR(core::CheckField(core::kUtilBinEdges, e,
                                            absl::StrCat(field, ".bin_edges[", k, "]")));
    if (k > 0 && e < estimate.bin_edges(k - 1))
      return Invalid(field + ".bin_edges", "edges must rise within 0..1");
  }
  UtilizationRange r{0, 1, 0};
  double mass = 0;
  for (int k = 0; k < classes; ++k) {
    const double p = estimate.probabilities(k);
    // Above 1 the sum can overflow to infinity and the mean to NaN, which compares as
    // neither bad nor acceptable.
    GPUEST_RETURN_IF_ERROR(core::CheckField(
        core::kUtilProbabilities, p, absl::StrCat(field, ".probabilities[", k, "]")));
    mass += p;
    r.value += p * (estimate.bin_edges(k) + estimate.bin_edges(k + 1)) / 2;
    if (p >= kClassMass) {
      r.low = std::min(r.low, estimate.bin_edges(k));
      r.high = std::max(r.high, estimate.bin_edges(k + 1));
    }
  }
  if (mass <= 0) return Invalid(field + ".probabilities", "sum to zero");
  r.value /= mass;
  r.low = std::min(r.low, r.value);
  r.high = std::max(r.high, r.value);
  return r;
}

absl::Status CheckDescriptionGpu(const v1::EstimateRequest& description,
                                 const std::string& field, const core::GpuProfile& target,
                                 const core::GpuProfiles& catalog) {
  if (description.gpu().empty()) return absl::OkStatus();
  const core::GpuProfile* named = catalog.Find(description.gpu());
  if (named != nullptr && named->id == target.id) return absl::OkStatus();
  return Invalid(field + ".gpu",
                 absl::StrCat("names '", description.gpu().substr(0, 128),
                              "' but the job is placed on ", target.id,
                              "; leave it empty (the job is estimated for the GPU it is "
                              "placed on)"));
}

UtilizationRange UnknownUtilization() { return {1.0, 0.0, 1.0}; }

UtilizationRange MeasuredByNvidiaSmi(double percent) {
  return Around(percent / 100.0, 0);
}

namespace {

// ResolveJob's three kinds of job, each into out (named already).

absl::Status ResolveMeasured(const v1::MeasuredJob& m, const std::string& field,
                             const ContentionModel& contention, ResolvedJob& out) {
  GPUEST_RETURN_IF_ERROR(core::CheckField(core::kMeasuredMemory, m.memory_in_use_bytes(),
                                          field + ".measured.memory_in_use_bytes"));
  out.requirement_bytes = m.memory_in_use_bytes();
  out.requirement_basis = "measured in use (its CUDA context included)";
  GPUEST_ASSIGN_OR_RETURN(out.util, FromMeasured(m, field + ".measured", contention));
  out.source = m.source();
  return absl::OkStatus();
}

absl::Status ResolveEstimated(const v1::EstimatedJob& e, const std::string& field,
                              const core::GpuProfile& gpu, ResolvedJob& out) {
  GPUEST_RETURN_IF_ERROR(core::CheckField(core::kEstimatedPeak, e.peak_bytes(),
                                          field + ".estimate.peak_bytes"));
  out.requirement_bytes = e.peak_bytes();
  out.requirement_basis = "an earlier estimate's peak";
  if (e.peak_excludes_context()) {
    out.requirement_bytes =
        common::SaturatingAdd(out.requirement_bytes, gpu.context_bytes);
    absl::StrAppendFormat(&out.requirement_basis, " plus %s's CUDA context (%.0f MiB)",
                          gpu.id, common::InMiB(static_cast<double>(gpu.context_bytes)));
  } else {
    out.requirement_basis += " (its CUDA context included)";
  }
  if (e.has_utilization()) {
    GPUEST_ASSIGN_OR_RETURN(
        out.util,
        UtilizationFromEstimate(e.utilization(), field + ".estimate.utilization"));
    out.source = v1::UTILIZATION_SOURCE_ESTIMATE;
  } else {
    out.util = UnknownUtilization();
  }
  return absl::OkStatus();
}

// Estimated here, by engine, for gpu.
absl::Status ResolveDescribed(const v1::EstimateRequest& description,
                              const std::string& field, const core::GpuProfile& gpu,
                              const core::Engine& engine,
                              const common::WorkDeadline& deadline, ResolvedJob& out) {
  v1::EstimateRequest request = description;
  GPUEST_RETURN_IF_ERROR(CheckDescriptionGpu(request, field + ".description", gpu,
                                             engine.registry()->gpus()));
  request.set_gpu(gpu.id);
  absl::StatusOr<v1::EstimateResponse> response = engine.Estimate(request, deadline);
  // Stopped by the deadline or the caller: the call's outcome, not this field's.
  if (!response.ok() && common::StoppedByCaller(response.status()))
    return response.status();
  if (!response.ok()) {
    return absl::Status(
        response.status().code(),
        absl::StrCat(field, ".description.", response.status().message()));
  }
  if (!response->has_recommendation() || response->recommendation().memory_bytes() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ".description: no estimator gave a memory figure"));
  }
  out.requirement_bytes = response->recommendation().memory_bytes();
  out.gpus = core::GpusPerJob(request.model().parallelism());
  out.estimator_id = response->recommendation().estimator_id();
  out.cap = response->recommendation().cap();
  out.requirement_basis =
      absl::StrCat("estimated for ", gpu.id, ": ", response->recommendation().basis());
  out.warnings.assign(response->warnings().begin(), response->warnings().end());
  if (const v1::UtilizationEstimate* u = GractOf(*response)) {
    GPUEST_ASSIGN_OR_RETURN(out.util,
                            UtilizationFromEstimate(*u, field + ".description"));
    out.source = v1::UTILIZATION_SOURCE_ESTIMATE;
  } else {
    out.util = UnknownUtilization();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ResolvedJob> ResolveJob(const v1::PlacementJob& job,
                                       const std::string& field,
                                       const core::GpuProfile& gpu,
                                       const core::Engine& engine,
                                       const ContentionModel& contention,
                                       const common::WorkDeadline& deadline) {
  ResolvedJob out;
  out.name = job.name().empty() ? field : job.name();
  switch (job.job_case()) {
    case v1::PlacementJob::kMeasured:
      GPUEST_RETURN_IF_ERROR(ResolveMeasured(job.measured(), field, contention, out));
      return out;
    case v1::PlacementJob::kEstimate:
      GPUEST_RETURN_IF_ERROR(ResolveEstimated(job.estimate(), field, gpu, out));
      return out;
    case v1::PlacementJob::kDescription:
      GPUEST_RETURN_IF_ERROR(
          ResolveDescribed(job.description(), field, gpu, engine, deadline, out));
      return out;
    case v1::PlacementJob::JOB_NOT_SET:
      break;
  }
  return Invalid(field, "a job needs a description, an estimate or a measurement");
}

}  // namespace gpuest::placement
