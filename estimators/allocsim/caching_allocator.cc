#include "estimators/allocsim/caching_allocator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace gpuest::allocsim {
namespace {

uint64_t RoundUp(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Segments are spaced apart in the fake address space, so blocks of two segments are
// never adjacent; merging follows the prev/next links anyway.
constexpr uint64_t kSegmentGap = uint64_t{1} << 30;

}  // namespace

CachingAllocator::CachingAllocator(const AllocatorConfig& config) : config_(config) {}

uint64_t CachingAllocator::RoundSize(uint64_t size) {
  return size < kMinBlockSize ? kMinBlockSize : RoundUp(size, kMinBlockSize);
}

uint64_t CachingAllocator::SegmentSize(uint64_t rounded_size) {
  if (rounded_size <= kSmallSize) return kSmallBuffer;
  if (rounded_size < kMinLargeAlloc) return kLargeBuffer;
  return RoundUp(rounded_size, kRoundLarge);
}

CachingAllocator::BlockId CachingAllocator::NewBlock(const Block& b) {
  if (!unused_ids_.empty()) {
    const BlockId id = unused_ids_.back();
    unused_ids_.pop_back();
    blocks_[id] = b;
    return id;
  }
  blocks_.push_back(b);
  return static_cast<BlockId>(blocks_.size() - 1);
}

bool CachingAllocator::TakeFreeBlock(bool small, uint64_t size, BlockId* out) {
  Pool& pool = PoolOf(small);
  auto it = pool.lower_bound(FreeKey{size, 0, -1});
  if (it == pool.end()) return false;
  // get_free_block: no oversize block for a request below max_split_size, and an
  // oversize request may round up by at most kLargeBuffer.
  if (size < config_.max_split_size && it->size >= config_.max_split_size) return false;
  if (size >= config_.max_split_size && it->size >= size + kLargeBuffer) return false;
  *out = it->id;
  pool.erase(it);
  return true;
}

bool CachingAllocator::ShouldSplit(const Block& b, uint64_t size) const {
  const uint64_t remaining = b.size - size;
  if (b.small || config_.expandable_segments) return remaining >= kMinBlockSize;
  return size < config_.max_split_size && remaining > kSmallSize;
}

bool CachingAllocator::MapSegment(bool small, uint64_t size, BlockId* out) {
  if (config_.expandable_segments) return GrowExpandable(small, size, out);
  const uint64_t segment = SegmentSize(size);
  if (config_.capacity_bytes != 0 && reserved_ + segment > config_.capacity_bytes) {
    return false;
  }
  Block b;
  b.address = next_address_;
  b.size = segment;
  b.small = small;
  next_address_ += segment + kSegmentGap;
  reserved_ += segment;
  *out = NewBlock(b);
  return true;
}

bool CachingAllocator::GrowExpandable(bool small, uint64_t size, BlockId* out) {
  const uint64_t granule = small ? kSmallBuffer : kLargeBuffer;
  BlockId& tail = expandable_tail_[small ? 1 : 0];
  const bool tail_free = tail >= 0 && !blocks_[tail].allocated;
  const uint64_t have = tail_free ? blocks_[tail].size : 0;
  const uint64_t grow = RoundUp(size - std::min(size, have), granule);
  if (config_.capacity_bytes != 0 && reserved_ + grow > config_.capacity_bytes)
    return false;
  reserved_ += grow;
  if (tail_free) {
    PoolOf(small).erase(KeyOf(tail));
    blocks_[tail].size += grow;
    *out = tail;
    return true;
  }
  Block b;
  b.small = small;
  b.size = grow;
  if (tail >= 0) {
    b.address = blocks_[tail].address + blocks_[tail].size;
    b.prev = tail;
  } else {
    b.address = next_address_;
    next_address_ += kSegmentGap << 8;  // Room for the segment to grow.
  }
  const BlockId id = NewBlock(b);
  if (tail >= 0) blocks_[tail].next = id;
  tail = id;
  *out = id;
  return true;
}

void CachingAllocator::ReleaseSegment(BlockId id) {
  PoolOf(blocks_[id].small).erase(KeyOf(id));
  reserved_ -= blocks_[id].size;
  unused_ids_.push_back(id);
}

bool CachingAllocator::ReleaseOversize(bool small, uint64_t size) {
  if (config_.max_split_size == std::numeric_limits<uint64_t>::max()) return false;
  // release_available_cached_blocks: free whole oversize segments, largest first,
  // until at least max(size, max_split_size) is released.
  const uint64_t target = std::max(size, config_.max_split_size);
  Pool& pool = PoolOf(small);
  uint64_t released = 0;
  std::vector<BlockId> victims;
  for (auto it = pool.rbegin(); it != pool.rend() && released < target; ++it) {
    const Block& b = blocks_[it->id];
    if (b.size < config_.max_split_size) break;
    if (b.prev >= 0 || b.next >= 0) continue;
    victims.push_back(it->id);
    released += b.size;
  }
  if (released < target) return false;
  for (BlockId id : victims) ReleaseSegment(id);
  return true;
}

void CachingAllocator::ReleaseCached() {
  // release_cached_blocks: every cached block that is a whole segment goes back.
  for (bool small : {false, true}) {
    std::vector<BlockId> whole;
    for (const FreeKey& key : PoolOf(small)) {
      const Block& b = blocks_[key.id];
      if (b.prev < 0 && b.next < 0) whole.push_back(key.id);
    }
    for (BlockId id : whole) {
      if (expandable_tail_[small ? 1 : 0] == id) expandable_tail_[small ? 1 : 0] = -1;
      ReleaseSegment(id);
    }
    // An expandable segment unmaps the free granules at its end.
    BlockId tail = expandable_tail_[small ? 1 : 0];
    if (tail >= 0 && !blocks_[tail].allocated) {
      const uint64_t granule = small ? kSmallBuffer : kLargeBuffer;
      const uint64_t unmap = blocks_[tail].size / granule * granule;
      if (unmap > 0) {
        PoolOf(small).erase(KeyOf(tail));
        blocks_[tail].size -= unmap;
        reserved_ -= unmap;
        if (blocks_[tail].size > 0) PoolOf(small).insert(KeyOf(tail));
      }
    }
  }
}

void CachingAllocator::TrackPeaks() {
  peak_allocated_ = std::max(peak_allocated_, allocated_);
  peak_reserved_ = std::max(peak_reserved_, reserved_);
}

absl::StatusOr<CachingAllocator::BlockId> CachingAllocator::Malloc(uint64_t size) {
  const uint64_t rounded = RoundSize(size);
  const bool small = rounded <= kSmallSize;
  BlockId id = -1;
  if (!TakeFreeBlock(small, rounded, &id)) {
    bool mapped = MapSegment(small, rounded, &id);
    if (!mapped && ReleaseOversize(small, rounded))
      mapped = MapSegment(small, rounded, &id);
    if (!mapped) {
      ReleaseCached();
      ++alloc_retries_;
      mapped = MapSegment(small, rounded, &id);
    }
    if (!mapped) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "out of memory: ", rounded, " bytes requested with ", allocated_,
          " allocated and ", reserved_, " reserved of ", config_.capacity_bytes));
    }
  }
  if (ShouldSplit(blocks_[id], rounded)) {
    Block rest;
    rest.small = blocks_[id].small;
    rest.address = blocks_[id].address + rounded;
    rest.size = blocks_[id].size - rounded;
    rest.prev = id;
    rest.next = blocks_[id].next;
    const BlockId rest_id = NewBlock(rest);  // May move blocks_: index again below.
    if (rest.next >= 0) blocks_[rest.next].prev = rest_id;
    blocks_[id].next = rest_id;
    blocks_[id].size = rounded;
    BlockId& tail = expandable_tail_[rest.small ? 1 : 0];
    if (tail == id) tail = rest_id;
    PoolOf(rest.small).insert(KeyOf(rest_id));
  }
  blocks_[id].allocated = true;
  allocated_ += blocks_[id].size;
  TrackPeaks();
  return id;
}

void CachingAllocator::Free(BlockId id) {
  Block& b = blocks_[id];
  b.allocated = false;
  allocated_ -= b.size;
  BlockId& tail = expandable_tail_[b.small ? 1 : 0];
  // Merge with free neighbours of the same segment.
  if (b.prev >= 0 && !blocks_[b.prev].allocated) {
    const BlockId prev = b.prev;
    PoolOf(b.small).erase(KeyOf(prev));
    blocks_[prev].size += b.size;
    blocks_[prev].next = b.next;
    if (b.next >= 0) blocks_[b.next].prev = prev;
    if (tail == id) tail = prev;
    unused_ids_.push_back(id);
    id = prev;
  }
  Block& merged = blocks_[id];
  if (merged.next >= 0 && !blocks_[merged.next].allocated) {
    const BlockId next = merged.next;
    PoolOf(merged.small).erase(KeyOf(next));
    merged.size += blocks_[next].size;
    merged.next = blocks_[next].next;
    if (merged.next >= 0) blocks_[merged.next].prev = id;
    if (tail == next) tail = id;
    unused_ids_.push_back(next);
  }
  PoolOf(merged.small).insert(KeyOf(id));
}

}  // namespace gpuest::allocsim
