// File: quantile.h
//
// The one quantile of the project: the trainer's utilization tertiles, the
// calibration's safe factor and error percentiles, and the load generator's latency
// percentiles all use it.
//
// Definition: nearest rank (Hyndman & Fan type 1, the inverse of the empirical CDF).
// The q-quantile of n values is the ceil(q x n)-th smallest (the smallest for q = 0):
// the smallest observed value v with at least q x n of the values at or below v.
// Chosen over interpolation because its callers make claims about counts of rows or
// calls: "keeps 95 % of the training rows safe" and "99 % of the calls took at most
// this long" hold exactly for an observed value, and may fail for a value interpolated
// between two observations.
#pragma once

#include <vector>

namespace gpuest::common {

// q in [0, 1] (clamped). NaN for no values.
double Quantile(std::vector<double> values, double q);

// The same on values sorted ascending: for several quantiles of one sample.
double QuantileOfSorted(const std::vector<double>& sorted, double q);

}  // namespace gpuest::common
