#include "lab/trainer/classification_scores.h"

#include <cmath>
#include <map>

namespace gpuest::trainer {

Scores Score(const std::vector<int>& truth, const std::vector<int>& predicted) {
  Scores s;
  std::map<int, int> tp, fp, fn;
  int correct = 0;
  for (size_t i = 0; i < truth.size(); ++i) {
    if (truth[i] < 0) continue;
    ++s.n;
    if (truth[i] == predicted[i]) {
      ++correct;
      ++tp[truth[i]];
    } else {
      ++fn[truth[i]];
      ++fp[predicted[i]];
    }
  }
  if (s.n == 0) return s;
  s.accuracy = static_cast<double>(correct) / s.n;
  std::map<int, bool> classes;
  for (auto* m : {&tp, &fp, &fn}) {
    for (const auto& [c, n] : *m) classes[c] = true;
  }
  double f1 = 0;
  for (const auto& [c, unused] : classes) {
    const double denom = 2.0 * tp[c] + fp[c] + fn[c];
    f1 += denom > 0 ? 2.0 * tp[c] / denom : 0.0;
  }
  s.macro_f1 = f1 / static_cast<double>(classes.size());
  return s;
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

double StdDev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = Mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

std::pair<double, double> Wilson95(double accuracy, int n) {
  if (n <= 0) return {0, 1};
  const double z = 1.959963984540054, z2 = z * z, p = accuracy;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z * std::sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / (1 + z2 / n);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

}  // namespace gpuest::trainer
