// lab/trainer/split: the held-out split and the folds, stratified and the same for
// the same seed.
#include "lab/trainer/split.h"

#include <set>

#include "gtest/gtest.h"

namespace gpuest::trainer {
namespace {

TEST(Split, StratifiedAndDeterministic) {
  std::vector<int> rows, labels;
  for (int i = 0; i < 1000; ++i) {
    rows.push_back(i);
    labels.push_back(i % 10 == 0 ? 1 : 0);  // 100 of class 1.
  }
  const Split a = StratifiedSplit(rows, labels, 0.3, 7);
  const Split b = StratifiedSplit(rows, labels, 0.3, 7);
  EXPECT_EQ(a.test, b.test);
  EXPECT_NE(a.test, StratifiedSplit(rows, labels, 0.3, 8).test);
  EXPECT_EQ(a.test.size(), 300u);
  int ones = 0;
  for (int r : a.test) ones += labels[r];
  EXPECT_EQ(ones, 30);
  std::set<int> all(a.train.begin(), a.train.end());
  for (int r : a.test) EXPECT_TRUE(all.insert(r).second) << "row in both parts";
  EXPECT_EQ(all.size(), 1000u);

  const auto folds = StratifiedFolds(a.train, labels, 3, 9);
  ASSERT_EQ(folds.size(), 3u);
  size_t total = 0;
  for (const auto& f : folds) {
    total += f.size();
    int f_ones = 0;
    for (int r : f) f_ones += labels[r];
    EXPECT_NEAR(f_ones, 70 / 3.0, 1.0);
  }
  EXPECT_EQ(total, a.train.size());
}

}  // namespace
}  // namespace gpuest::trainer
