// estimators/allocsim/parallelism: one rank's step against the ZeRO paper's accounting
// (Rajbhandari et al. 2020, section 5: with mixed-precision Adam, 2 bytes of fp16
// parameters, 2 of gradients and K = 12 of fp32 master weights, momentum and variance
// per parameter; per device (2 + 2 + K) psi replicated, 2 psi + 2 psi + K psi / N with
// Pos, 2 psi + (2 + K) psi / N with Pos+g, (2 + 2 + K) psi / N with Pos+g+p), DDP's
// buckets and FSDP's gathered units.
#include "estimators/allocsim/parallelism.h"

#include <array>
#include <cstdint>

#include "estimators/allocsim/trace_replay.h"
#include "gtest/gtest.h"

namespace gpuest::allocsim {
namespace {

constexpr uint64_t kPsi = 8 << 20;           // Parameters (8 M: divisible by 8).
constexpr uint64_t kActivations = 64 << 20;  // Saved for backward.

// One mixed-precision Adam step of psi parameters in one tensor each: parameters, then
// the forward's activations, the backward's gradients, the optimizer's first state and
// its update's temporary (a multi-tensor AdamW's intermediate, 4 bytes a parameter).
v1::AllocationTrace Step() {
  v1::AllocationTrace t;
  auto add = [&](uint64_t bytes, uint32_t at, uint32_t free_at,
                 v1::AllocationCategory c) {
    t.add_size_bytes(bytes);
    t.add_alloc_at(at);
    t.add_free_at(free_at);
    t.add_category(c);
  };
  add(2 * kPsi, 0, 0, v1::ALLOCATION_CATEGORY_PARAMETER);
  add(kActivations, 1, 4, v1::ALLOCATION_CATEGORY_ACTIVATION);
  add(2 * kPsi, 3, 0, v1::ALLOCATION_CATEGORY_GRADIENT);
  add(12 * kPsi, 5, 0, v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE);
  add(4 * kPsi, 6, 7, v1::ALLOCATION_CATEGORY_TEMPORARY);  // The optimizer's update.
  return t;
}

std::array<uint64_t, 7> Bytes(const v1::AllocationTrace& t) {
  std::array<uint64_t, 7> by{};
  for (int i = 0; i < t.size_bytes_size(); ++i) by[t.category(i)] += t.size_bytes(i);
  return by;
}

v1::Parallelism Layout(uint32_t n, v1::Sharding sharding, uint64_t unit = 0) {
  v1::Parallelism p;
  p.set_data_parallel(n);
  p.set_sharding(sharding);
  p.set_largest_unit_bytes(unit);
  return p;
}

uint64_t States(const std::array<uint64_t, 7>& b) {
  return b[v1::ALLOCATION_CATEGORY_PARAMETER] + b[v1::ALLOCATION_CATEGORY_GRADIENT] +
         b[v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE];
}

TEST(PerRankTrace, ZeroStagesDivideWhatThePaperSaysTheyDivide) {
  const v1::AllocationTrace step = Step();
  const uint64_t n = 8;
  EXPECT_FALSE(SpreadsOverGpus(Layout(1, v1::SHARDING_NONE)));
  EXPECT_EQ(States(Bytes(step)), 16 * kPsi);
  const RankTrace z1 = PerRankTrace(step, Layout(n, v1::SHARDING_OPTIMIZER));
  EXPECT_EQ(States(Bytes(z1.trace)), 4 * kPsi + 12 * kPsi / n);
  // A rank updates its own partition: the update's temporary shrinks with the state.
  EXPECT_EQ(Bytes(z1.trace)[v1::ALLOCATION_CATEGORY_TEMPORARY], 4 * kPsi / n);
  const RankTrace z2 = PerRankTrace(step, Layout(n, v1::SHARDING_GRADIENTS, kPsi));
  EXPECT_EQ(States(Bytes(z2.trace)), 2 * kPsi + 14 * kPsi / n);
  // Plus one unit's full gradients during the backward.
  EXPECT_EQ(Bytes(z2.trace)[v1::ALLOCATION_CATEGORY_TEMPORARY], kPsi + 4 * kPsi / n);
  const RankTrace z3 = PerRankTrace(step, Layout(n, v1::SHARDING_PARAMETERS, kPsi));
  EXPECT_EQ(States(Bytes(z3.trace)), 16 * kPsi / n);
  // Plus two units gathered, and one unit's gradients.
  EXPECT_EQ(Bytes(z3.trace)[v1::ALLOCATION_CATEGORY_TEMPORARY], 3 * kPsi + 4 * kPsi / n);
  EXPECT_FALSE(z3.unit_guessed);
  // Activations are each rank's own batch: unchanged.
  for (const RankTrace* r : {&z1, &z2, &z3})
    EXPECT_EQ(Bytes(r->trace)[v1::ALLOCATION_CATEGORY_ACTIVATION], kActivations);
  EXPECT_NE(z3.basis.find("ZeRO-3"), std::string::npos) << z3.basis;
}

TEST(PerRankTrace, EachStageLowersTheReplayedPeak) {
  const v1::AllocationTrace step = Step();
  auto peak = [](const v1::AllocationTrace& t) {
    auto r = ReplayTrace(t, AllocatorConfig{}, {});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->peak_allocated_bytes : 0;
  };
  const uint64_t one = peak(step);
  const uint64_t z1 = peak(PerRankTrace(step, Layout(8, v1::SHARDING_OPTIMIZER)).trace);
  const uint64_t z2 =
      peak(PerRankTrace(step, Layout(8, v1::SHARDING_GRADIENTS, kPsi / 8)).trace);
  const uint64_t z3 =
      peak(PerRankTrace(step, Layout(8, v1::SHARDING_PARAMETERS, kPsi / 8)).trace);
  EXPECT_GT(one, z1);
  EXPECT_GT(z1, z2);
  EXPECT_GT(z2, z3);
}

TEST(PerRankTrace, DdpCopiesTheGradientsIntoBucketsUnlessTheyAreViews) {
  const v1::AllocationTrace step = Step();
  const RankTrace ddp = PerRankTrace(step, Layout(8, v1::SHARDING_NONE));
  EXPECT_EQ(Bytes(ddp.trace)[v1::ALLOCATION_CATEGORY_GRADIENT], 4 * kPsi);
  EXPECT_EQ(Bytes(ddp.trace)[v1::ALLOCATION_CATEGORY_PARAMETER], 2 * kPsi);
  v1::Parallelism views = Layout(8, v1::SHARDING_NONE);
  views.set_gradient_as_bucket_view(true);
  EXPECT_EQ(Bytes(PerRankTrace(step, views).trace)[v1::ALLOCATION_CATEGORY_GRADIENT],
            2 * kPsi);
}

TEST(PerRankTrace, TensorParallelSplitsTheWeightsOffloadMovesStateToTheHost) {
  const v1::AllocationTrace step = Step();
  v1::Parallelism tp;
  tp.set_tensor_parallel(4);
  const auto by = Bytes(PerRankTrace(step, tp).trace);
  EXPECT_EQ(States(by), 4 * kPsi);
  EXPECT_EQ(by[v1::ALLOCATION_CATEGORY_ACTIVATION], kActivations);  // Left whole.
  v1::Parallelism offload = Layout(8, v1::SHARDING_PARAMETERS, kPsi);
  offload.set_offload_optimizer(true);
  offload.set_offload_parameters(true);
  const auto off = Bytes(PerRankTrace(step, offload).trace);
  EXPECT_EQ(off[v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE], 0u);
  EXPECT_EQ(off[v1::ALLOCATION_CATEGORY_TEMPORARY], 3 * kPsi);  // The update on the host.
  EXPECT_EQ(off[v1::ALLOCATION_CATEGORY_PARAMETER], 0u);
  EXPECT_EQ(off[v1::ALLOCATION_CATEGORY_GRADIENT], 2 * kPsi / 8);
}

TEST(PerRankTrace, AnUnknownUnitIsTheLargestParameterAndSaysSo) {
  const RankTrace z3 = PerRankTrace(Step(), Layout(8, v1::SHARDING_PARAMETERS));
  EXPECT_TRUE(z3.unit_guessed);
  EXPECT_EQ(Bytes(z3.trace)[v1::ALLOCATION_CATEGORY_TEMPORARY],
            3 * 2 * kPsi + 4 * kPsi / 8);
}

}  // namespace
}  // namespace gpuest::allocsim
