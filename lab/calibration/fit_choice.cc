#include "lab/calibration/fit_choice.h"

namespace gpuest::calibration {

std::vector<GroupedRow> OutOfGroupFitRows(const std::string& family,
                                          const std::vector<CalibrationRow>& synthetic,
                                          bool synthetic_joins,
                                          const std::vector<RealRun>& real) {
  std::vector<GroupedRow> rows;
  if (synthetic_joins) {
    for (const CalibrationRow& r : synthetic) {
      rows.push_back({"gpumemnet-" + family, r, true, "gpumemnet"});
    }
  }
  for (const RealRun& r : real) {
    rows.push_back({r.group, r.row, !r.oom && !r.transient, "real"});
  }
  return rows;
}

Shares SharesOf(const std::vector<RealRun>& runs, const std::vector<double>& upper_mib,
                double card_mib) {
  int n = 0, safe = 0, tight = 0;
  Shares shares;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].oom) {
      shares.oom_above_card += upper_mib[i] > card_mib;
      continue;
    }
    if (runs[i].transient) continue;
    ++n;
    safe += Safe(upper_mib[i], runs[i].row.measured_mib);
    tight += SafeAndTight(upper_mib[i], runs[i].row.measured_mib);
  }
  if (n > 0) {
    shares.safe = static_cast<double>(safe) / n;
    shares.safe_and_tight = static_cast<double>(tight) / n;
  }
  return shares;
}

bool CandidateServes(const Shares& incumbent, const Shares& candidate,
                     double safe_quantile) {
  if (incumbent.safe < safe_quantile) return true;
  return candidate.safe >= safe_quantile &&
         candidate.safe_and_tight > incumbent.safe_and_tight &&
         candidate.oom_above_card >= incumbent.oom_above_card;
}

}  // namespace gpuest::calibration
