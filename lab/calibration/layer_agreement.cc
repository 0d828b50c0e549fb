#include "lab/calibration/layer_agreement.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_format.h"
#include "common/quantile.h"

namespace gpuest::calibration {
namespace {

struct TypeCount {
  int runs = 0, outside = 0;
  std::vector<double> ratios;  // Layers / traced, of the runs holding the type.
};

double Ratio(const LayerAgreementRun& r) {
  return r.traced_allocated_mib > 0 ? r.layers_allocated_mib / r.traced_allocated_mib : 0;
}

// The rows of the layer-type table for one family: of the types its runs hold, the
// `types` the runs outside the tolerance (outside of them) hold more often than the
// runs within (within of them), by the difference of the two shares.
std::string TypesOutside(const std::string& family,
                         std::map<std::string, TypeCount> counts, int within, int outside,
                         int types) {
  // By how much more often the misses hold the type than the runs within do.
  auto lift = [&](const TypeCount& c) {
    return (outside > 0 ? static_cast<double>(c.outside) / outside : 0) -
           (within > 0 ? static_cast<double>(c.runs - c.outside) / within : 0);
  };
  std::vector<std::pair<std::string, TypeCount>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end(), [&](const auto& a, const auto& b) {
    const double la = lift(a.second), lb = lift(b.second);
    return la != lb ? la > lb : a.first < b.first;
  });
  std::string rows;
  for (int i = 0; i < std::min<int>(types, static_cast<int>(sorted.size())); ++i) {
    TypeCount& c = sorted[i].second;
    if (lift(c) <= 0) break;
    std::sort(c.ratios.begin(), c.ratios.end());
    absl::StrAppendFormat(&rows, "| %s | %s | %d of %d | %d of %d | %.2f |\n", family,
                          sorted[i].first, c.outside, outside, c.runs - c.outside, within,
                          common::Quantile(c.ratios, 0.5));
  }
  return rows;
}

// One family's row of the agreement table; its rows of the layer-type table go to
// by_type.
std::string FamilyAgreement(const std::string& family,
                            const std::vector<const LayerAgreementRun*>& rows,
                            double tolerance, int types, std::string& by_type) {
  std::map<std::string, bool> model_within;
  std::vector<double> ratios;
  int within = 0;
  std::map<std::string, TypeCount> counts;
  for (const LayerAgreementRun* r : rows) {
    const double ratio = Ratio(*r);
    const bool ok = std::abs(ratio - 1) <= tolerance;
    ratios.push_back(ratio);
    within += ok;
    auto [it, fresh] = model_within.emplace(r->model, ok);
    if (!fresh) it->second = it->second && ok;
    for (const std::string& t : r->layer_types) {
      TypeCount& c = counts[t];
      ++c.runs;
      c.outside += !ok;
      c.ratios.push_back(ratio);
    }
  }
  std::sort(ratios.begin(), ratios.end());
  int models_within = 0;
  for (const auto& [model, ok] : model_within) models_within += ok;
  by_type += TypesOutside(family, std::move(counts), within,
                          static_cast<int>(rows.size()) - within, types);
  return absl::StrFormat(
      "| %s | %zu | %.3f | %zu | %.3f | %.2f | %.2f | %.2f |\n", family, rows.size(),
      static_cast<double>(within) / static_cast<double>(rows.size()), model_within.size(),
      static_cast<double>(models_within) / static_cast<double>(model_within.size()),
      common::Quantile(ratios, 0.1), common::Quantile(ratios, 0.5),
      common::Quantile(ratios, 0.9));
}

}  // namespace

std::string RenderLayerAgreement(const std::vector<LayerAgreementRun>& runs,
                                 double tolerance, int types) {
  std::map<std::string, std::vector<const LayerAgreementRun*>> by_family;
  for (const LayerAgreementRun& r : runs) by_family[r.family].push_back(&r);
  std::string md = absl::StrFormat(
      "| family | runs | within %.0f %% | models | models with every run within | "
      "layers / traced: P10 | P50 | P90 |\n|---|---|---|---|---|---|---|---|\n",
      100 * tolerance);
  std::string by_type;
  for (const auto& [family, rows] : by_family) {
    md += FamilyAgreement(family, rows, tolerance, types, by_type);
  }
  if (!by_type.empty()) {
    absl::StrAppendFormat(
        &md,
        "\nThe layer types the runs outside %.0f %% hold more often than the runs within "
        "(by the difference of the two shares, largest first: where the layer rules "
        "part from the trace, an association, not an attribution):\n\n"
        "| family | layer type | runs outside holding it | runs within holding it | "
        "layers / traced, its runs: P50 |\n|---|---|---|---|---|\n%s",
        100 * tolerance, by_type);
  }
  return md;
}

}  // namespace gpuest::calibration
