// File: classification_scores.h
//
// Classification metrics for the trainer's report: accuracy, macro-F1, mean and
// standard deviation over folds, and a binomial (Wilson) 95 % interval.
#pragma once

#include <utility>
#include <vector>

namespace gpuest::trainer {

struct Scores {
  double accuracy = 0;
  double macro_f1 = 0;
  int n = 0;  // Rows with a label.
};

// truth -1 rows are skipped. Macro-F1 averages over the classes present in the truth
// or in the predictions.
Scores Score(const std::vector<int>& truth, const std::vector<int>& predicted);

double Mean(const std::vector<double>& v);
// Sample standard deviation (n - 1); 0 for fewer than two values.
double StdDev(const std::vector<double>& v);

// Wilson score interval for `accuracy` over n trials, 95 %.
std::pair<double, double> Wilson95(double accuracy, int n);

}  // namespace gpuest::trainer
