#include "estimators/allocsim/trace_replay.h"

#include "estimators/allocsim/caching_allocator.h"
#include "gtest/gtest.h"
#include "tests/support/examples.h"

namespace gpuest::allocsim {
namespace {

constexpr uint64_t MiB = 1024 * 1024;

AllocatorConfig WithCapacity(uint64_t bytes) {
  AllocatorConfig c;
  c.capacity_bytes = bytes;
  return c;
}

void Add(v1::AllocationTrace& t, uint64_t bytes, uint32_t at, uint32_t free_at,
         v1::AllocationCategory category) {
  t.add_size_bytes(bytes);
  t.add_alloc_at(at);
  t.add_free_at(free_at);
  t.add_category(category);
}

// weights 40 MiB, input 12 MiB, two activations, a temporary, gradients, Adam state.
v1::AllocationTrace SmallStep(uint32_t clock_scale) {
  v1::AllocationTrace t;
  auto at = [&](uint32_t tick) { return tick * clock_scale; };
  Add(t, 40 * MiB, at(1), 0, v1::ALLOCATION_CATEGORY_PARAMETER);
  Add(t, 12 * MiB, at(2), 0, v1::ALLOCATION_CATEGORY_INPUT);
  Add(t, 30 * MiB, at(3), at(9), v1::ALLOCATION_CATEGORY_ACTIVATION);
  Add(t, 30 * MiB, at(4), at(8), v1::ALLOCATION_CATEGORY_ACTIVATION);
  Add(t, 16 * MiB, at(5), at(6), v1::ALLOCATION_CATEGORY_TEMPORARY);
  Add(t, 40 * MiB, at(7), 0, v1::ALLOCATION_CATEGORY_GRADIENT);
  Add(t, 80 * MiB, at(10), 0, v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE);
  return t;
}

// A long replay stops at the deadline: it checks while replaying, not only before.
TEST(TraceReplay, StopsWhenTheDeadlinePassesMidReplay) {
  v1::AllocationTrace t;
  for (uint32_t i = 0; i < 100'000; ++i) {
    Add(t, (i % 7 + 1) * MiB, 2 * i + 1, 2 * i + 2, v1::ALLOCATION_CATEGORY_TEMPORARY);
  }
  ASSERT_TRUE(ReplayTrace(t, {}, {}, 2).ok());
  int checks = 0;
  // Says "cancelled" from its third check on: the replay must have got that far.
  const common::WorkDeadline cancelled_later(absl::InfiniteFuture(),
                                             [&] { return ++checks > 2; });
  auto r = ReplayTrace(t, {}, {}, 2, cancelled_later);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(checks, 3);

  auto late =
      ReplayTrace(t, {}, {}, 2, common::WorkDeadline(absl::Now() - absl::Seconds(1)));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
}

TEST(TraceReplay, PeaksAndBreakdownOfASmallStep) {
  auto r = ReplayTrace(SmallStep(1), {}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  // Live at most: 40+12+30+30+16 = 128 (tick 5) and 40+12+30+30+40 = 152 (tick 7);
  // after the activations go: 40+12+40+80 = 172 (tick 10).
  EXPECT_EQ(r->peak_allocated_bytes, 172 * MiB);
  // Every request is over 10 MiB, so each gets a segment of its own size, and no freed
  // segment (30, 30, 16 MiB) is large enough for a later request (40, 80 MiB): the
  // cache only grows, to every segment at once.
  EXPECT_EQ(r->peak_reserved_bytes, (40 + 12 + 30 + 30 + 16 + 40 + 80) * MiB);
  uint64_t sum = 0;
  for (uint64_t b : r->live_at_peak) sum += b;
  EXPECT_EQ(sum, r->peak_allocated_bytes);
  // The breakdown is of the allocated peak (tick 10), not of the cache.
  EXPECT_EQ(r->live_at_peak[v1::ALLOCATION_CATEGORY_PARAMETER], 40 * MiB);
  EXPECT_EQ(r->live_at_peak[v1::ALLOCATION_CATEGORY_GRADIENT], 40 * MiB);
  EXPECT_EQ(r->live_at_peak[v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE], 80 * MiB);
  EXPECT_EQ(r->live_at_peak[v1::ALLOCATION_CATEGORY_ACTIVATION], 0u);
  EXPECT_FALSE(r->out_of_memory);
}

TEST(TraceReplay, SparseClockGivesTheSameAnswer) {
  auto dense = ReplayTrace(SmallStep(1), {}, {});
  auto sparse = ReplayTrace(SmallStep(100000), {}, {});  // Takes the comparison sort.
  ASSERT_TRUE(dense.ok() && sparse.ok());
  EXPECT_EQ(dense->peak_allocated_bytes, sparse->peak_allocated_bytes);
  EXPECT_EQ(dense->peak_reserved_bytes, sparse->peak_reserved_bytes);
  EXPECT_EQ(dense->live_at_peak, sparse->live_at_peak);
}

TEST(TraceReplay, PersistentWorkspaceCountsFromTheStart) {
  auto r = ReplayTrace(SmallStep(1), {}, {{kDefaultCublasWorkspaceBytes}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->live_at_peak[0], kDefaultCublasWorkspaceBytes);
  EXPECT_EQ(r->peak_allocated_bytes, 172 * MiB + kDefaultCublasWorkspaceBytes);
}

TEST(TraceReplay, ReportsOutOfMemoryOnASmallCard) {
  auto r = ReplayTrace(SmallStep(1), WithCapacity(128 * MiB), {});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->out_of_memory);
  auto fits = ReplayTrace(SmallStep(1), WithCapacity(512 * MiB), {});
  ASSERT_TRUE(fits.ok());
  EXPECT_FALSE(fits->out_of_memory);
}

// A GPUMemNet CNN (Adam, batch 50) traced with its cuDNN workspaces: freed mid-step, they
// leave blocks that later requests split, and the next step's largest activation needs
// a segment of its own; the reserved peak grows at steps 2, 3 and 4 and settles then, as
// its kind did on an H100 (../shared/data/h100-op-transients/step_reserved.jsonl).
TEST(TraceReplay, ReplaysUntilTheReservedPeakSettles) {
  const v1::AllocationTrace trace =
      testing::RequestFromFile(std::string(GPUEST_TEST_DATA_DIR) +
                               "/traces/gpumemnet_cnn_b50.json")
          .model()
          .trace();
  const std::vector<PersistentAllocation> cublas = {{kDefaultCublasWorkspaceBytes}};
  auto two = ReplayTrace(trace, {}, cublas, 2);
  auto four = ReplayTrace(trace, {}, cublas, 4);
  auto settled = ReplayUntilSettled(trace, {}, cublas, 2);
  ASSERT_TRUE(two.ok() && four.ok() && settled.ok());
  EXPECT_GT(four->peak_reserved_bytes, two->peak_reserved_bytes);
  EXPECT_EQ(settled->peak_reserved_bytes, four->peak_reserved_bytes);
  // Step 5 mapped nothing new: that is how it knows step 4 settled.
  EXPECT_EQ(settled->steps_replayed, 5);
  EXPECT_EQ(two->steps_replayed, 2);
}

TEST(TraceReplay, AStepThatSettlesAtOnceReplaysOneStepMoreThanAskedAtMost) {
  auto settled = ReplayUntilSettled(SmallStep(1), {}, {}, 2);
  ASSERT_TRUE(settled.ok()) << settled.status();
  EXPECT_GE(settled->steps_replayed, 2);
  EXPECT_LE(settled->steps_replayed, 3);
  auto longer = ReplayTrace(SmallStep(1), {}, {}, kMaxSettleSteps);
  ASSERT_TRUE(longer.ok());
  EXPECT_EQ(settled->peak_reserved_bytes, longer->peak_reserved_bytes);
}

}  // namespace
}  // namespace gpuest::allocsim
