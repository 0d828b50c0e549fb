#include "estimators/horus/horus.h"

#include <limits>

#include "gtest/gtest.h"

namespace gpuest::horus {
namespace {

TEST(Horus, FollowsTheFormula) {
  // 4 x (A x B + P + B x P) with A=1000, P=500, B=8.
  EXPECT_EQ(HorusBytes(1000, 500, 8), 4u * (1000 * 8 + 500 + 8 * 500));
  EXPECT_EQ(HorusBytes(0, 0, 1), 0u);
  EXPECT_EQ(HorusBytes(7430, 3560152, 996),
            4ull * (7430ull * 996 + 3560152 + 996ull * 3560152));
}

TEST(Horus, SaturatesInsteadOfOverflowing) {
  const int64_t big = int64_t{1} << 44;
  EXPECT_EQ(HorusBytes(big, big, int64_t{1} << 24), std::numeric_limits<uint64_t>::max());
}

}  // namespace
}  // namespace gpuest::horus
