// File: split.h
//
// Deterministic stratified splits: the held-out test split and the cross-validation
// folds. A seeded std::mt19937_64 with our own Fisher-Yates shuffle, so that the same
// seed gives the same split on every standard library.
#pragma once

#include <cstdint>
#include <vector>

namespace gpuest::trainer {

// Shuffles in place.
void Shuffle(std::vector<int>& v, uint64_t seed);

struct Split {
  std::vector<int> train;
  std::vector<int> test;
};

// Per stratum (label), round(test_fraction x its size) rows go to the test split.
// `rows` are indices into `labels`.
Split StratifiedSplit(const std::vector<int>& rows, const std::vector<int>& labels,
                      double test_fraction, uint64_t seed);

// k folds over `rows`; fold i is the validation part of round i.
std::vector<std::vector<int>> StratifiedFolds(const std::vector<int>& rows,
                                              const std::vector<int>& labels, int k,
                                              uint64_t seed);

}  // namespace gpuest::trainer
