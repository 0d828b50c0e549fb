// File: units.h
//
// Byte units, binary as nvidia-smi and PyTorch count them: one definition for the
// whole tree. Integer constants for exact sizes; InMiB / InGiB for the fractional
// figures of messages and reports (a uint64 divided by kMiB would round down).
#pragma once

#include <cstdint>
#include <limits>

namespace gpuest::common {

inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

constexpr double InMiB(double bytes) { return bytes / static_cast<double>(kMiB); }
constexpr double InGiB(double bytes) { return bytes / static_cast<double>(kGiB); }

// a + b, or UINT64_MAX when the sum overflows: a sum of absurd figures reads as "more
// than any card", never as a small number.
constexpr uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b
             ? std::numeric_limits<uint64_t>::max()
             : a + b;
}

// capacity - need as a signed byte count (negative: short by that much), saturated at
// INT64_MIN / INT64_MAX instead of wrapping.
constexpr int64_t SignedHeadroom(uint64_t capacity, uint64_t need) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (capacity >= need) {
    return capacity - need > kMax ? std::numeric_limits<int64_t>::max()
                                  : static_cast<int64_t>(capacity - need);
  }
  return need - capacity > kMax ? std::numeric_limits<int64_t>::min()
                                : -static_cast<int64_t>(need - capacity);
}

}  // namespace gpuest::common
