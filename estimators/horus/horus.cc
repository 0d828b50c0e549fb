#include "estimators/horus/horus.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace gpuest::horus {
namespace {

class HorusEstimator final : public core::Estimator {
 public:
  HorusEstimator() {
    info_.set_id("horus");
    info_.set_kind(v1::ESTIMATOR_KIND_ANALYTICAL);
    info_.set_family(v1::MODEL_FAMILY_UNSPECIFIED);
    info_.set_version("1");
    info_.set_description(
        "Horus formula 4 x (A x B + P + B x P) as applied by the GPUMemNet study; an "
        "analytical baseline that ignores the framework, allocator and optimizer.");
    info_.set_estimates_memory(true);
  }

  const v1::EstimatorInfo& Info() const override { return info_; }

  bool AppliesTo(const core::EstimationInput&) const override { return true; }

  absl::Status Estimate(const core::EstimationInput& input, v1::EstimatorResult& result,
                        std::vector<v1::Warning>&) const override {
    const v1::FeatureVector& f = input.features;
    result.mutable_memory()->set_point_bytes(
        HorusBytes(f.total_activations(), f.total_parameters(), f.batch_size()));
    // The study found the formula off by large factors either way.
    result.set_confidence(0.1);
    // A closed formula has no training distribution: every valid input is in its
    // domain (and a formula is the least trusted kind anyway).
    result.set_in_distribution(true);
    result.set_basis(
        absl::StrCat("formula 4 x (A x B + P + B x P) with A=", f.total_activations(),
                     ", P=", f.total_parameters(), ", B=", f.batch_size()));
    return absl::OkStatus();
  }

 private:
  v1::EstimatorInfo info_;
};

}  // namespace

uint64_t HorusBytes(int64_t activations_per_sample, int64_t parameters,
                    int64_t batch_size) {
  // In long double: A x B and B x P overflow 64 bits for the largest valid inputs.
  const long double a = activations_per_sample, p = parameters, b = batch_size;
  const long double bytes = 4.0L * (a * b + p + b * p);
  constexpr auto kMax = std::numeric_limits<uint64_t>::max();
  return bytes >= static_cast<long double>(kMax) ? kMax : static_cast<uint64_t>(bytes);
}

std::unique_ptr<core::Estimator> MakeHorusEstimator() {
  return std::make_unique<HorusEstimator>();
}

}  // namespace gpuest::horus
