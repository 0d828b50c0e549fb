// lab/contention/least_squares: LeastSquares (contention_fit.h) on LAPACK through
// libtorch: an exact line recovered, the ridge on every weight but the bias, and the
// systems it cannot solve refused.
#include <vector>

#include "gtest/gtest.h"
#include "lab/contention/contention_fit.h"

namespace gpuest::contention {
namespace {

TEST(ContentionFitTest, LeastSquaresRecoversAnExactLine) {
  // y = 1 + 2a - 3b, checked by hand at four points.
  const std::vector<std::vector<double>> x = {{1, 0, 0}, {1, 1, 0}, {1, 0, 1}, {1, 2, 3}};
  const std::vector<double> y = {1, 3, -2, -4};
  auto w = contention::LeastSquares(x, y, 0);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_NEAR((*w)[0], 1, 1e-9);
  EXPECT_NEAR((*w)[1], 2, 1e-9);
  EXPECT_NEAR((*w)[2], -3, 1e-9);
  EXPECT_EQ(contention::LeastSquares({{1, 1}, {1, 1}}, {1, 2}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ContentionFitTest, TheRidgeShrinksTheWeightsButNotTheBias) {
  // y = 5 + 2a on a centred a: the bias is the mean whatever the ridge.
  const std::vector<std::vector<double>> x = {{1, -1}, {1, 0}, {1, 1}};
  const std::vector<double> y = {3, 5, 7};
  auto plain = LeastSquares(x, y, 0);
  auto ridged = LeastSquares(x, y, 1.0);
  ASSERT_TRUE(plain.ok() && ridged.ok());
  EXPECT_NEAR((*plain)[1], 2, 1e-9);
  // a.a = 2 and a.y = 4, with the ridge x 3 rows: (2 + 3) w = 4, so w = 0.8.
  EXPECT_NEAR((*ridged)[1], 0.8, 1e-9);
  EXPECT_NEAR((*ridged)[0], 5, 1e-9);
}

TEST(ContentionFitTest, LeastSquaresRefusesNoRowsAndRaggedRows) {
  EXPECT_EQ(LeastSquares({}, {}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const absl::Status ragged = LeastSquares({{1, 2}, {1}}, {1, 2}, 0).status();
  EXPECT_EQ(ragged.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ragged.message(), "least squares: row 1 has 1 columns, not 2");
}

}  // namespace
}  // namespace gpuest::contention
