// File: caching_allocator.h
//
// A simulation of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// one device, one stream), following that file's rules: 512 B
// rounding; a small pool (<= 1 MiB) and a large pool; 2 MiB / 20 MiB / 2 MiB-rounded
// segments; best fit by (size, address); splitting (small pool: remainder >= 512 B,
// large pool: remainder > 1 MiB and request < max_split_size); merging of adjacent
// free blocks; and on a failed cudaMalloc, release of oversize then of all unsplit
// cached segments before a retry. Expandable segments grow one segment per pool in
// 2 MiB (small) or 20 MiB (large) granules.
//
// No device memory is touched: it only counts.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/status/statusor.h"

namespace gpuest::allocsim {

inline constexpr uint64_t kMinBlockSize = 512;
inline constexpr uint64_t kSmallSize = 1 << 20;     // Largest small-pool request.
inline constexpr uint64_t kSmallBuffer = 2 << 20;   // Small-pool segment.
inline constexpr uint64_t kLargeBuffer = 20 << 20;  // Segment for 1-10 MiB requests.
inline constexpr uint64_t kMinLargeAlloc = 10
                                           << 20;  // From here, segments fit the request.
inline constexpr uint64_t kRoundLarge = 2 << 20;   // Rounding of large segments.

// cuBLAS's default workspace before Hopper, allocated through the caching allocator and
// kept for the process lifetime: 4096 KiB x 2 + 16 KiB x 8 (CUBLAS_WORKSPACE_CONFIG
// ":4096:2:16:8"; aten/src/ATen/cuda/CublasHandlePool.cpp).
inline constexpr uint64_t kDefaultCublasWorkspaceBytes = 4096 * 1024 * 2 + 16 * 1024 * 8;

struct AllocatorConfig {
  // PYTORCH_CUDA_ALLOC_CONF max_split_size_mb, in bytes; unlimited by default.
  uint64_t max_split_size = std::numeric_limits<uint64_t>::max();
  bool expandable_segments = false;
  // Device memory cudaMalloc may hand out; 0 means unlimited.
  uint64_t capacity_bytes = 0;
};

class CachingAllocator {
 public:
  using BlockId = int32_t;

  explicit CachingAllocator(const AllocatorConfig& config);

  // ResourceExhausted when the device is full even after releasing cached segments.
  absl::StatusOr<BlockId> Malloc(uint64_t size);
  void Free(BlockId block);

  uint64_t allocated() const { return allocated_; }  // Rounded, live.
  uint64_t reserved() const { return reserved_; }    // Held in segments.
  uint64_t peak_allocated() const { return peak_allocated_; }
  uint64_t peak_reserved() const { return peak_reserved_; }
  int alloc_retries() const { return alloc_retries_; }

  static uint64_t RoundSize(uint64_t size);
  static uint64_t SegmentSize(uint64_t rounded_size);

 private:
  struct Block {
    uint64_t address = 0;
    uint64_t size = 0;
    BlockId prev = -1;  // Neighbours within one segment.
    BlockId next = -1;
    bool small = false;
    bool allocated = false;
  };
  // Free blocks ordered as PyTorch's BlockComparator does (one stream): size, address.
  struct FreeKey {
    uint64_t size;
    uint64_t address;
    BlockId id;
    bool operator<(const FreeKey& o) const {
      return size != o.size ? size < o.size : address < o.address;
    }
  };
  using Pool = absl::btree_set<FreeKey>;

  Pool& PoolOf(bool small) { return small ? small_pool_ : large_pool_; }
  FreeKey KeyOf(BlockId id) const { return {blocks_[id].size, blocks_[id].address, id}; }
  BlockId NewBlock(const Block& b);
  bool TakeFreeBlock(bool small, uint64_t size, BlockId* out);
  bool ShouldSplit(const Block& b, uint64_t size) const;
  bool MapSegment(bool small, uint64_t size, BlockId* out);
  bool GrowExpandable(bool small, uint64_t size, BlockId* out);
  bool ReleaseOversize(bool small, uint64_t size);
  void ReleaseCached();
  void ReleaseSegment(BlockId id);
  void TrackPeaks();

  AllocatorConfig config_;
  std::vector<Block> blocks_;
  std::vector<BlockId> unused_ids_;
  Pool small_pool_, large_pool_;
  // Expandable segments: the last block of each pool's one segment, or -1.
  BlockId expandable_tail_[2] = {-1, -1};
  uint64_t next_address_ = 0;
  uint64_t allocated_ = 0, reserved_ = 0, peak_allocated_ = 0, peak_reserved_ = 0;
  int alloc_retries_ = 0;
};

}  // namespace gpuest::allocsim
