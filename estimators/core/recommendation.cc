#include "estimators/core/recommendation.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/units.h"

namespace gpuest::core {
namespace {

// The rank of recommendation.h's trust order: higher is trusted more; 0 for a result
// of no known kind.
int Trust(const v1::EstimatorResult& r) {
  const bool in = r.in_distribution();
  switch (r.kind()) {
    case v1::ESTIMATOR_KIND_SIMULATOR:
      return in ? 5 : 3;
    case v1::ESTIMATOR_KIND_CLASSIFIER:
      return in ? 4 : 2;
    case v1::ESTIMATOR_KIND_ANALYTICAL:
      return 1;
    default:
      return 0;
  }
}

uint64_t SafeFigure(const v1::MemoryEstimate& m) {
  return std::max(m.upper_bytes(), m.point_bytes());
}

// The ways to hold a job to its reservation. PyTorch's set_per_process_memory_fraction
// limits the caching allocator's reserved memory to fraction x the card
// (CUDACachingAllocator.cpp, allowed_memory_maximum); the CUDA context lives outside
// it, so the fraction leaves it out.
v1::MemoryCap CapFor(uint64_t reserve_bytes, const v1::MemoryEstimate& memory,
                     const GpuProfile* gpu) {
  v1::MemoryCap cap;
  cap.set_needed(memory.has_transient());
  cap.set_hami_gpumem_mib((reserve_bytes + common::kMiB - 1) / common::kMiB);
  std::string fraction = "on the target GPU (name one with --gpu)";
  if (gpu != nullptr && gpu->memory_bytes > 0) {
    const double f = static_cast<double>(reserve_bytes > gpu->context_bytes
                                             ? reserve_bytes - gpu->context_bytes
                                             : 0) /
                     static_cast<double>(gpu->memory_bytes);
    // Rounded down to 3 decimals: a fraction read from the text caps no higher.
    cap.set_per_process_memory_fraction(
        std::clamp(std::floor(f * 1000) / 1000, 0.0, 1.0));
    fraction = absl::StrFormat(
        "(%.3f on %s: the reservation less its %.0f MiB context, "
        "over %.0f MiB)",
        cap.per_process_memory_fraction(), gpu->id, common::InMiB(gpu->context_bytes),
        common::InMiB(gpu->memory_bytes));
  }
  cap.set_how(absl::StrFormat(
      "%s: a HAMi limit nvidia.com/gpumem: %d (MiB; HAMi-core enforces it and lowers "
      "what "
      "cudaMemGetInfo reports, so the search sizes itself within it), or "
      "torch.cuda.set_per_process_memory_fraction(f) in the job %s, or "
      "torch.backends.cudnn.benchmark = False (no search); schedulers that only count "
      "memory (Volcano's and KAI's gpu-memory) do not enforce it",
      cap.needed() ? "needed on a shared GPU: uncapped, the job's first step can take "
                     "the card's free memory"
                   : "not needed for a transient (none is known); to enforce the "
                     "reservation anyway",
      cap.hami_gpumem_mib(), fraction));
  return cap;
}

// What an estimate says of the need, as a range: a classifier's predicted bin, a
// simulator's point to its upper bound. upper 0: open (the top bin).
struct Range {
  uint64_t lower = 0, upper = 0;
};

Range RangeOf(const v1::MemoryEstimate& m) {
  const int bin = m.predicted_bin();
  if (bin >= 0 && bin < m.bins_size()) {
    return {m.bins(bin).lower_bytes(), m.bins(bin).upper_bytes()};
  }
  return {std::min(m.point_bytes(), m.upper_bytes()), m.upper_bytes()};
}

bool Disjoint(Range a, Range b) {
  return (a.upper > 0 && a.upper < b.lower) || (b.upper > 0 && b.upper < a.lower);
}

std::string InWords(Range r) {
  return r.upper == 0 ? absl::StrFormat("more than %.2f GiB", common::InGiB(r.lower))
                      : absl::StrFormat("%.2f-%.2f GiB", common::InGiB(r.lower),
                                        common::InGiB(r.upper));
}

// Why the trusted result outranks another whose range it does not meet.
std::string WhyTrusted(const v1::EstimatorResult& trusted,
                       const v1::EstimatorResult& other) {
  if (trusted.kind() == v1::ESTIMATOR_KIND_SIMULATOR && trusted.in_distribution()) {
    return "it simulates this job's own training step, its uncertain layers widening "
           "its bound, where the classifier reads features alone";
  }
  if (!other.in_distribution()) {
    return absl::StrCat(other.estimator_id(),
                        " is outside what it was trained or calibrated on");
  }
  return "a classifier in its training distribution is trusted over a simulator "
         "outside its calibration";
}

// The results of the other model-based kind whose ranges miss the trusted one's, in
// words: which the recommendation trusts, and why.
std::string Disagreements(
    const google::protobuf::RepeatedPtrField<v1::EstimatorResult>& results,
    const v1::EstimatorResult& trusted) {
  const auto model_based = [](v1::EstimatorKind k) {
    return k == v1::ESTIMATOR_KIND_SIMULATOR || k == v1::ESTIMATOR_KIND_CLASSIFIER;
  };
  if (!model_based(trusted.kind())) return "";
  const Range mine = RangeOf(trusted.memory());
  std::string out;
  for (const v1::EstimatorResult& r : results) {
    if (&r == &trusted || !r.has_memory() || !model_based(r.kind()) ||
        r.kind() == trusted.kind() || SafeFigure(r.memory()) == 0) {
      continue;
    }
    const Range theirs = RangeOf(r.memory());
    if (!Disjoint(mine, theirs)) continue;
    absl::StrAppend(&out, "; ", r.estimator_id(), " says ", InWords(theirs), ", ",
                    trusted.estimator_id(), " ", InWords(mine), ": trusted ",
                    trusted.estimator_id(), ", as ", WhyTrusted(trusted, r));
  }
  return out;
}

}  // namespace

std::optional<v1::Recommendation> Recommend(
    const google::protobuf::RepeatedPtrField<v1::EstimatorResult>& results,
    const GpuProfile* gpu) {
  const v1::EstimatorResult* best = nullptr;
  for (const v1::EstimatorResult& r : results) {
    if (!r.has_memory() || SafeFigure(r.memory()) == 0) continue;
    if (best == nullptr || Trust(r) > Trust(*best) ||
        (Trust(r) == Trust(*best) &&
         SafeFigure(r.memory()) > SafeFigure(best->memory()))) {
      best = &r;
    }
  }
  if (best == nullptr) return std::nullopt;
  v1::Recommendation rec;
  rec.set_memory_bytes(SafeFigure(best->memory()));
  rec.set_estimator_id(best->estimator_id());
  rec.set_basis(
      absl::StrCat(best->memory().upper_bytes() > 0 ? "upper bound" : "point estimate",
                   " of ", best->estimator_id(),
                   ", the largest of the most trusted estimators present (simulator > "
                   "classifier in their distributions, then simulator > classifier out "
                   "of them, then formulas)",
                   Disagreements(results, *best)));
  if (gpu != nullptr) {
    v1::GpuFit& fit = *rec.mutable_fit();
    fit.set_gpu(gpu->id);
    fit.set_capacity_bytes(gpu->memory_bytes);
    fit.set_fits(rec.memory_bytes() <= gpu->memory_bytes);
    fit.set_headroom_bytes(common::SignedHeadroom(gpu->memory_bytes, rec.memory_bytes()));
    fit.set_allocator_retry(best->memory().allocator_retry());
  }
  *rec.mutable_cap() = CapFor(rec.memory_bytes(), best->memory(), gpu);
  rec.set_uncapped_peak_bytes(
      std::max(rec.memory_bytes(), best->memory().transient().reach_bytes()));
  return rec;
}

}  // namespace gpuest::core
