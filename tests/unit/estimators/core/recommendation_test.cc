// The recommendation rule (estimators/core/recommendation.h): trust order and the fit.
#include "estimators/core/recommendation.h"

#include "common/units.h"
#include "gtest/gtest.h"

namespace gpuest::core {
namespace {

v1::EstimatorResult MemoryResult(const std::string& id, v1::EstimatorKind kind,
                                 uint64_t point, uint64_t upper) {
  v1::EstimatorResult r;
  r.set_estimator_id(id);
  r.set_kind(kind);
  r.set_in_distribution(true);
  r.mutable_memory()->set_point_bytes(point);
  r.mutable_memory()->set_upper_bytes(upper);
  return r;
}

v1::EstimatorResult OutOfDistribution(v1::EstimatorResult r) {
  r.set_in_distribution(false);
  return r;
}

// The trust order of recommendation.h: in-distribution simulator > in-distribution
// classifier > out-of-distribution simulator > out-of-distribution classifier >
// formula. The figures grow down the order, so the largest never wins by size alone.
TEST(Recommendation, TrustsModelBasedEstimatesInOrderAndFormulasLast) {
  google::protobuf::RepeatedPtrField<v1::EstimatorResult> results;
  *results.Add() =
      MemoryResult("sim", v1::ESTIMATOR_KIND_SIMULATOR, common::kGiB, 2 * common::kGiB);
  *results.Add() = MemoryResult("classifier", v1::ESTIMATOR_KIND_CLASSIFIER, common::kGiB,
                                3 * common::kGiB);
  *results.Add() = OutOfDistribution(MemoryResult("sim-ood", v1::ESTIMATOR_KIND_SIMULATOR,
                                                  common::kGiB, 4 * common::kGiB));
  *results.Add() = OutOfDistribution(MemoryResult(
      "classifier-ood", v1::ESTIMATOR_KIND_CLASSIFIER, common::kGiB, 5 * common::kGiB));
  *results.Add() =
      MemoryResult("formula", v1::ESTIMATOR_KIND_ANALYTICAL, 100 * common::kGiB, 0);
  for (const char* expected : {"sim", "classifier", "sim-ood", "classifier-ood"}) {
    const auto rec = Recommend(results, nullptr);
    ASSERT_TRUE(rec.has_value());
    EXPECT_EQ(rec->estimator_id(), expected);
    EXPECT_EQ(rec->memory_bytes(), results.Get(0).memory().upper_bytes()) << expected;
    results.erase(results.begin());
  }
  // Only the formula left: it answers.
  const auto formula = Recommend(results, nullptr);
  ASSERT_TRUE(formula.has_value());
  EXPECT_EQ(formula->estimator_id(), "formula");
  EXPECT_EQ(formula->memory_bytes(), 100 * common::kGiB);
}

TEST(Recommendation, AFormulaNeverOutranksAnEstimateOutOfItsDistribution) {
  google::protobuf::RepeatedPtrField<v1::EstimatorResult> results;
  *results.Add() = MemoryResult("classifier", v1::ESTIMATOR_KIND_CLASSIFIER, common::kGiB,
                                2 * common::kGiB);
  *results.Add() =
      MemoryResult("formula", v1::ESTIMATOR_KIND_ANALYTICAL, 100 * common::kGiB, 0);
  // A result that does not say is read as out of its distribution, still above a
  // formula.
  results.Mutable(0)->clear_in_distribution();
  auto rec = Recommend(results, nullptr);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->estimator_id(), "classifier");
  EXPECT_EQ(rec->memory_bytes(), 2 * common::kGiB);
  // Within one rank the largest safe figure wins.
  *results.Add() = OutOfDistribution(MemoryResult(
      "classifier-2", v1::ESTIMATOR_KIND_CLASSIFIER, common::kGiB, 6 * common::kGiB));
  rec = Recommend(results, nullptr);
  EXPECT_EQ(rec->estimator_id(), "classifier-2");
  EXPECT_EQ(rec->memory_bytes(), 6 * common::kGiB);
}

// fits compares the recommended figure with the card, whatever the allocator's retry
// would do; the retry verdict of the recommended estimator goes beside it.
// A classifier's bin that misses the trusted simulator's range is named in the basis,
// with which is trusted and why; an agreeing one is not.
TEST(Recommendation, SaysWhichItTrustsWhereAClassifierBinAndABoundDisagree) {
  google::protobuf::RepeatedPtrField<v1::EstimatorResult> results;
  *results.Add() = MemoryResult("analytic", v1::ESTIMATOR_KIND_SIMULATOR,
                                5 * common::kGiB, 6 * common::kGiB);
  v1::EstimatorResult classifier = MemoryResult(
      "gpumemnet", v1::ESTIMATOR_KIND_CLASSIFIER, 12 * common::kGiB, 16 * common::kGiB);
  for (uint64_t edge : {0, 8, 16}) {
    v1::MemoryBin* bin = classifier.mutable_memory()->add_bins();
    bin->set_lower_bytes(edge * common::kGiB);
    bin->set_upper_bytes((edge + 8) * common::kGiB);
  }
  classifier.mutable_memory()->set_predicted_bin(1);  // [8, 16) GiB.
  *results.Add() = classifier;
  auto rec = Recommend(results, nullptr);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->estimator_id(), "analytic");
  EXPECT_NE(rec->basis().find("gpumemnet says 8.00-16.00 GiB, analytic 5.00-6.00 GiB: "
                              "trusted analytic, as it simulates this job's own"),
            std::string::npos)
      << rec->basis();

  results.Mutable(1)->mutable_memory()->set_predicted_bin(0);  // [0, 8): agrees.
  rec = Recommend(results, nullptr);
  EXPECT_EQ(rec->basis().find("gpumemnet says"), std::string::npos) << rec->basis();

  // Outside its calibration the simulator gives way, and the basis says why.
  results.Mutable(1)->mutable_memory()->set_predicted_bin(1);
  results.Mutable(0)->set_in_distribution(false);
  rec = Recommend(results, nullptr);
  EXPECT_EQ(rec->estimator_id(), "gpumemnet");
  EXPECT_NE(rec->basis().find("trusted gpumemnet, as analytic is outside"),
            std::string::npos)
      << rec->basis();
}

TEST(Recommendation, TheFitCarriesTheRecommendedEstimatorsRetryVerdict) {
  GpuProfile card;
  card.id = "card";
  card.memory_bytes = 40 * common::kGiB;
  google::protobuf::RepeatedPtrField<v1::EstimatorResult> results;
  *results.Add() = MemoryResult("sim", v1::ESTIMATOR_KIND_SIMULATOR, 39 * common::kGiB,
                                40 * common::kGiB + 220 * common::kKiB);
  results.Mutable(0)->mutable_memory()->set_allocator_retry(v1::ALLOCATOR_RETRY_SAVES_IT);
  *results.Add() = MemoryResult("classifier", v1::ESTIMATOR_KIND_CLASSIFIER, common::kGiB,
                                2 * common::kGiB);
  auto rec = Recommend(results, &card);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->memory_bytes(), 40 * common::kGiB + 220 * common::kKiB);
  EXPECT_FALSE(rec->fit().fits());
  EXPECT_EQ(rec->fit().headroom_bytes(), -static_cast<int64_t>(220 * common::kKiB));
  EXPECT_EQ(rec->fit().allocator_retry(), v1::ALLOCATOR_RETRY_SAVES_IT);
  // A classifier gives no verdict, and the fit gives none for it.
  results.erase(results.begin());
  rec = Recommend(results, &card);
  EXPECT_TRUE(rec->fit().fits());
  EXPECT_EQ(rec->fit().allocator_retry(), v1::ALLOCATOR_RETRY_UNSPECIFIED);
}

}  // namespace
}  // namespace gpuest::core
