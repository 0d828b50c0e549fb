// The memory fit of jobs sharing a GPU (placement/memory_fit.h): each process pays its
// own context, a node's reported use counts, absurd figures saturate.
#include "placement/memory_fit.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "common/units.h"
#include "gtest/gtest.h"

namespace gpuest::placement {
namespace {

TEST(MemoryFitTest, EachProcessPaysItsOwnContext) {
  // Two jobs measured at 10 GiB each (their contexts included) and a candidate of 19 GiB
  // (its own context included) on 40 GiB: 39 GiB taken, 1 GiB left.
  const MemoryFit fit = FitMemory(
      40 * common::kGiB, {10 * common::kGiB, 10 * common::kGiB}, 19 * common::kGiB);
  EXPECT_TRUE(fit.fits);
  EXPECT_EQ(fit.used_bytes, 20 * common::kGiB);
  EXPECT_EQ(fit.headroom_bytes, static_cast<int64_t>(common::kGiB));
  const MemoryFit over = FitMemory(
      40 * common::kGiB, {10 * common::kGiB, 10 * common::kGiB}, 21 * common::kGiB);
  EXPECT_FALSE(over.fits);
  EXPECT_EQ(over.headroom_bytes, -static_cast<int64_t>(common::kGiB));
}

TEST(MemoryFitTest, NodeReportedUseCountsWhenLarger) {
  // The node sees 30 GiB in use; the jobs listed hold 12: the node's figure counts.
  EXPECT_EQ(FitMemory(40 * common::kGiB, {12 * common::kGiB}, 8 * common::kGiB,
                      30 * common::kGiB)
                .used_bytes,
            30 * common::kGiB);
  // A job estimated but not started is not in the node's figure: the sum counts.
  EXPECT_EQ(FitMemory(40 * common::kGiB, {12 * common::kGiB}, 8 * common::kGiB,
                      5 * common::kGiB)
                .used_bytes,
            12 * common::kGiB);
}

TEST(MemoryFitTest, AbsurdFiguresSaturateInsteadOfWrapping) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  const MemoryFit fit = FitMemory(40 * common::kGiB, {max, max}, max);
  EXPECT_FALSE(fit.fits);
  EXPECT_EQ(fit.used_bytes, max);
  EXPECT_EQ(fit.headroom_bytes, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(common::SaturatingAdd(max - 1, 1), max);
  EXPECT_EQ(common::SaturatingAdd(max, 1), max);
  EXPECT_EQ(common::SignedHeadroom(max, 0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(common::SignedHeadroom(0, 5), -5);
}

}  // namespace
}  // namespace gpuest::placement
