#include "lab/trainer/split.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

namespace gpuest::trainer {
namespace {

std::map<int, std::vector<int>> ByLabel(const std::vector<int>& rows,
                                        const std::vector<int>& labels) {
  std::map<int, std::vector<int>> strata;
  for (int r : rows) strata[labels[r]].push_back(r);
  return strata;
}

}  // namespace

void Shuffle(std::vector<int>& v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng() % i);
    std::swap(v[i - 1], v[j]);
  }
}

Split StratifiedSplit(const std::vector<int>& rows, const std::vector<int>& labels,
                      double test_fraction, uint64_t seed) {
  Split split;
  for (auto& [label, members] : ByLabel(rows, labels)) {
    Shuffle(members, seed + static_cast<uint64_t>(label) * 7919);
    const size_t test = static_cast<size_t>(
        std::lround(test_fraction * static_cast<double>(members.size())));
    split.test.insert(split.test.end(), members.begin(), members.begin() + test);
    split.train.insert(split.train.end(), members.begin() + test, members.end());
  }
  std::sort(split.train.begin(), split.train.end());
  std::sort(split.test.begin(), split.test.end());
  return split;
}

std::vector<std::vector<int>> StratifiedFolds(const std::vector<int>& rows,
                                              const std::vector<int>& labels, int k,
                                              uint64_t seed) {
  std::vector<std::vector<int>> folds(k);
  int next = 0;  // Rotates so that the strata's remainders spread over the folds.
  for (auto& [label, members] : ByLabel(rows, labels)) {
    Shuffle(members, seed + static_cast<uint64_t>(label) * 104729);
    for (int r : members) {
      folds[next].push_back(r);
      next = (next + 1) % k;
    }
  }
  for (auto& f : folds) std::sort(f.begin(), f.end());
  return folds;
}

}  // namespace gpuest::trainer
