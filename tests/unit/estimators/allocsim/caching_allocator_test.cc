#include "estimators/allocsim/caching_allocator.h"

#include "gtest/gtest.h"

namespace gpuest::allocsim {
namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

AllocatorConfig WithCapacity(uint64_t bytes) {
  AllocatorConfig c;
  c.capacity_bytes = bytes;
  return c;
}

AllocatorConfig WithMaxSplit(uint64_t bytes) {
  AllocatorConfig c;
  c.max_split_size = bytes;
  return c;
}

AllocatorConfig Expandable() {
  AllocatorConfig c;
  c.expandable_segments = true;
  return c;
}

TEST(CachingAllocator, RoundsTo512Bytes) {
  EXPECT_EQ(CachingAllocator::RoundSize(1), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(512), 512u);
  EXPECT_EQ(CachingAllocator::RoundSize(513), 1024u);
}

TEST(CachingAllocator, SegmentSizes) {
  EXPECT_EQ(CachingAllocator::SegmentSize(512), 2 * MiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(1 * MiB), 2 * MiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(1 * MiB + 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(10 * MiB - 512), 20 * MiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(10 * MiB), 10 * MiB);
  EXPECT_EQ(CachingAllocator::SegmentSize(11 * MiB + 512), 12 * MiB);
}

TEST(CachingAllocator, SmallRequestsShareOneSegment) {
  CachingAllocator a({});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(a.Malloc(256 * KiB).ok());
  EXPECT_EQ(a.reserved(), 2 * MiB);
  EXPECT_EQ(a.allocated(), 1 * MiB);
  // The default cuBLAS workspace, 8,519,680 B, lands in a 20 MiB segment.
  static_assert(kDefaultCublasWorkspaceBytes == 8519680);
  ASSERT_TRUE(a.Malloc(kDefaultCublasWorkspaceBytes).ok());
  EXPECT_EQ(a.reserved(), 22 * MiB);
}

TEST(CachingAllocator, LargeBlocksSplitWhenTheRestIsOverOneMiB) {
  CachingAllocator a({});
  ASSERT_TRUE(a.Malloc(6 * MiB).ok());
  ASSERT_TRUE(a.Malloc(6 * MiB).ok());
  ASSERT_TRUE(a.Malloc(6 * MiB).ok());
  EXPECT_EQ(a.reserved(), 20 * MiB);  // One 20 MiB segment, split three times.
  EXPECT_EQ(a.allocated(), 18 * MiB);
  ASSERT_TRUE(a.Malloc(3 * MiB).ok());  // Only 2 MiB left: a new segment.
  EXPECT_EQ(a.reserved(), 40 * MiB);
  ASSERT_TRUE(a.Malloc(2 * MiB).ok());  // The first segment's last 2 MiB, exactly.
  EXPECT_EQ(a.reserved(), 40 * MiB);
}

TEST(CachingAllocator, NoSplitWhenTheRestIsOneMiBOrLess) {
  CachingAllocator a({});
  auto big = a.Malloc(12 * MiB);
  ASSERT_TRUE(big.ok());
  a.Free(*big);
  ASSERT_TRUE(a.Malloc(11 * MiB + 512 * KiB).ok());
  EXPECT_EQ(a.reserved(), 12 * MiB);
  EXPECT_EQ(a.allocated(), 12 * MiB);  // The whole block, unsplit.
}

TEST(CachingAllocator, FreedNeighboursMergeAndAreReused) {
  CachingAllocator a({});
  auto x = a.Malloc(6 * MiB);
  auto y = a.Malloc(6 * MiB);
  ASSERT_TRUE(x.ok() && y.ok());
  a.Free(*x);
  a.Free(*y);
  EXPECT_EQ(a.allocated(), 0u);
  EXPECT_EQ(a.reserved(), 20 * MiB);     // Cached, not returned.
  ASSERT_TRUE(a.Malloc(19 * MiB).ok());  // Fits only in the merged 20 MiB block.
  EXPECT_EQ(a.reserved(), 20 * MiB);
  EXPECT_EQ(a.peak_reserved(), 20 * MiB);
}

TEST(CachingAllocator, BestFitPicksTheSmallestBlockThatFits) {
  CachingAllocator a({});
  auto x = a.Malloc(30 * MiB);
  auto y = a.Malloc(12 * MiB);
  ASSERT_TRUE(x.ok() && y.ok());
  a.Free(*x);
  a.Free(*y);
  auto z = a.Malloc(11 * MiB);
  ASSERT_TRUE(z.ok());
  EXPECT_EQ(*z, *y);
  EXPECT_EQ(a.reserved(), 42 * MiB);
}

TEST(CachingAllocator, FullDeviceReleasesCachedSegmentsAndRetries) {
  CachingAllocator a(WithCapacity(40 * MiB));
  auto x = a.Malloc(30 * MiB);
  ASSERT_TRUE(x.ok());
  a.Free(*x);
  ASSERT_TRUE(a.Malloc(32 * MiB).ok());  // 30 cached + 32 > 40: release, retry.
  EXPECT_EQ(a.alloc_retries(), 1);
  EXPECT_EQ(a.reserved(), 32 * MiB);
  EXPECT_EQ(a.peak_reserved(), 32 * MiB);
}

TEST(CachingAllocator, OutOfMemoryWhenLiveDataDoesNotFit) {
  CachingAllocator a(WithCapacity(40 * MiB));
  ASSERT_TRUE(a.Malloc(30 * MiB).ok());
  auto y = a.Malloc(20 * MiB);
  EXPECT_EQ(y.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(a.alloc_retries(), 1);
}

TEST(CachingAllocator, MaxSplitSizeKeepsOversizeBlocksFromSmallRequests) {
  CachingAllocator a(WithMaxSplit(10 * MiB));
  auto x = a.Malloc(30 * MiB);
  ASSERT_TRUE(x.ok());
  a.Free(*x);
  ASSERT_TRUE(a.Malloc(2 * MiB).ok());  // Not carved out of the 30 MiB block.
  EXPECT_EQ(a.reserved(), 50 * MiB);
  CachingAllocator b({});
  x = b.Malloc(30 * MiB);
  b.Free(*x);
  ASSERT_TRUE(b.Malloc(2 * MiB).ok());
  EXPECT_EQ(b.reserved(), 30 * MiB);  // Without the limit it is split.
}

TEST(CachingAllocator, ExpandableSegmentsAvoidGrowingFragmentation) {
  // Growing requests, each freed before the next: the classic fragmentation case.
  CachingAllocator fixed({}), expandable(Expandable());
  for (uint64_t mib = 11; mib <= 20; ++mib) {
    for (CachingAllocator* a : {&fixed, &expandable}) {
      auto id = a->Malloc(mib * MiB);
      ASSERT_TRUE(id.ok());
      a->Free(*id);
    }
  }
  EXPECT_EQ(expandable.peak_reserved(), 20 * MiB);  // One 20 MiB granule.
  EXPECT_GT(fixed.peak_reserved(), 60 * MiB);       // A new segment at most steps.
}

}  // namespace
}  // namespace gpuest::allocsim
