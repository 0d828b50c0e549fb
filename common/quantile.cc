#include "common/quantile.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpuest::common {

double QuantileOfSorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double rank =
      std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size()));
  const size_t index = rank <= 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

double Quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return QuantileOfSorted(values, q);
}

}  // namespace gpuest::common
