#include "lab/calibration/transient_evidence.h"

#include <map>

namespace gpuest::calibration {

std::vector<std::optional<TransientCase>> FindTransients(
    const std::vector<PeakRun>& runs) {
  std::map<std::string, std::vector<size_t>> by_model;
  for (size_t i = 0; i < runs.size(); ++i) by_model[runs[i].model].push_back(i);
  std::vector<std::optional<TransientCase>> cases(runs.size());
  for (const auto& [model, members] : by_model) {
    for (size_t i : members) {
      const PeakRun& run = runs[i];
      const double excess = run.measured_mib - run.simulated_mib;
      double largest_drop = 0;
      for (size_t j : members) {
        const PeakRun& larger = runs[j];
        if (larger.batch <= run.batch) continue;
        const double larger_excess = larger.measured_mib - larger.simulated_mib;
        const double drop = excess - larger_excess;
        const double margin =
            kTransientMarginMib + kTransientMarginShare * larger.simulated_mib;
        if (drop > margin && drop > largest_drop) {
          largest_drop = drop;
          cases[i] = TransientCase{larger.batch, excess, larger_excess};
        }
      }
    }
  }
  return cases;
}

}  // namespace gpuest::calibration
