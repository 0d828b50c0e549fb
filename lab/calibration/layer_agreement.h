// File: layer_agreement.h
//
// How closely the step built from a layer sequence (estimators/allocsim/layer_trace.h,
// served as "analytic") reproduces the traced step of the same model (allocsim), compared
// where no measurement enters: the simulated allocated peaks of both, run by run. The
// runs outside the tolerance are then counted by the layer types their models hold, so
// that the report names the types most often present where the layer rules miss: an
// association, not an attribution, which tells where to look next.
#pragma once

#include <string>
#include <vector>

namespace gpuest::calibration {

struct LayerAgreementRun {
  std::string family;  // "cnn"
  std::string model;   // timm's name; the runs of a model share it.
  double traced_allocated_mib = 0;
  double layers_allocated_mib = 0;
  std::vector<std::string> layer_types;  // Canonical, each once.
};

// Markdown: per family, the runs and models whose layer-built allocated peak is within
// `tolerance` (relative) of the traced one, the ratios' quantiles, and the layer types
// of the runs outside it (the `types` most frequent).
std::string RenderLayerAgreement(const std::vector<LayerAgreementRun>& runs,
                                 double tolerance, int types);

}  // namespace gpuest::calibration
