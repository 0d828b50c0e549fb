// The memory fit of jobs sharing a GPU (placement/memory_fit.h): each process pays its
// own context, a node's reported use counts, absurd figures saturate.
#include "placement/memory_fit.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "common/units.h"
#include "gtest/gtest.h"

namespace gpuest {
namespace {

TEST(MemoryFitTest, EachProcessPaysItsOwnContext) {
  // Two jobs measured at 10 GiB each (their contexts included) and a candidate of 19 GiB
  // (its own context included) on 40 GiB: 39 GiB taken, 1 GiB left.
  const MemoryFit fit = FitMemory(40 * kGiB, {10 * kGiB, 10 * kGiB}, 19 * kGiB);
  EXPECT_TRUE(fit.fits);
  EXPECT_EQ(fit.used_bytes, 20 * kGiB);
  EXPECT_EQ(fit.headroom_bytes, static_cast<int64_t>(kGiB));
  const MemoryFit over = FitMemory(40 * kGiB, {10 * kGiB, 10 * kGiB}, 21 * kGiB);
  EXPECT_FALSE(over.fits);
  EXPECT_EQ(over.headroom_bytes, -static_cast<int64_t>(kGiB));
}

TEST(MemoryFitTest, NodeReportedUseCountsWhenLarger) {
  // The node sees 30 GiB in use; the jobs listed hold 12: the node's figure counts.
  EXPECT_EQ(FitMemory(40 * kGiB, {12 * kGiB}, 8 * kGiB, 30 * kGiB).used_bytes, 30 * kGiB);
  // A job estimated but not started is not in the node's figure: the sum counts.
  EXPECT_EQ(FitMemory(40 * kGiB, {12 * kGiB}, 8 * kGiB, 5 * kGiB).used_bytes, 12 * kGiB);
}

TEST(MemoryFitTest, AbsurdFiguresSaturateInsteadOfWrapping) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  const MemoryFit fit = FitMemory(40 * kGiB, {max, max}, max);
  EXPECT_FALSE(fit.fits);
  EXPECT_EQ(fit.used_bytes, max);
  EXPECT_EQ(fit.headroom_bytes, std::numeric_limits<int64_t>::min());
  EXPECT_EQ(SaturatingAdd(max - 1, 1), max);
  EXPECT_EQ(SaturatingAdd(max, 1), max);
  EXPECT_EQ(SignedHeadroom(max, 0), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(SignedHeadroom(0, 5), -5);
}

}  // namespace
}  // namespace gpuest
