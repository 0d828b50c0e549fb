// LeastSquares (contention_fit.h) on libtorch's LAPACK solver, the only libtorch in the
// contention fit: kept to this file so the rest compiles without torch's headers.
#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "lab/contention/contention_fit.h"

namespace gpuest::contention {

absl::StatusOr<std::vector<double>> LeastSquares(
    const std::vector<std::vector<double>>& x, const std::vector<double>& y,
    double ridge) {
  if (x.empty()) return absl::FailedPreconditionError("least squares on no rows");
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t k = static_cast<int64_t>(x[0].size());
  const auto f64 = torch::TensorOptions().dtype(torch::kFloat64);
  torch::Tensor design = torch::empty({n, k}, f64);
  auto d = design.accessor<double, 2>();
  for (int64_t r = 0; r < n; ++r) {
    if (static_cast<int64_t>(x[r].size()) != k) {
      return absl::InvalidArgumentError(absl::StrCat("least squares: row ", r, " has ",
                                                     x[r].size(), " columns, not ", k));
    }
    for (int64_t c = 0; c < k; ++c) d[r][c] = x[r][c];
  }
  const torch::Tensor target = torch::tensor(y, f64).unsqueeze(1);
  // Ridge on every weight but the bias, scaled by the rows as the fit's options say.
  torch::Tensor penalty = torch::eye(k, f64) * (ridge * static_cast<double>(n));
  penalty[0][0] = 0;
  const torch::Tensor gram = design.t().mm(design) + penalty;
  const torch::Tensor moment = design.t().mm(target);
  // A singular system: LAPACK's LU finds a zero pivot (a c10::Error), or, near it,
  // a condition too poor for the weights to mean anything.
  if (torch::linalg_cond(gram).item<double>() > 1e12) {
    return absl::FailedPreconditionError("least squares: singular normal equations");
  }
  torch::Tensor w;
  try {
    w = torch::linalg_solve(gram, moment).squeeze(1).contiguous();
  } catch (const c10::Error&) {
    return absl::FailedPreconditionError("least squares: singular normal equations");
  }
  return std::vector<double>(w.data_ptr<double>(), w.data_ptr<double>() + k);
}

}  // namespace gpuest::contention
