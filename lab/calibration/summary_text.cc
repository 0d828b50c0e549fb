#include "lab/calibration/summary_text.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "requests/summary_parser.h"

namespace gpuest::calibration {
namespace {

// 1234567 -> "1,234,567", as torchsummary prints counts.
std::string WithThousands(int64_t value) {
  std::string digits = absl::StrCat(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace

std::string RenderTorchsummary(const v1::ModelDescription& model) {
  const std::string rule(64, '-'), double_rule(64, '=');
  std::string text = absl::StrCat(
      rule, "\n",
      absl::StrFormat("%20s %25s %15s\n", "Layer (type)", "Output Shape", "Param #"),
      double_rule, "\n");
  int64_t total = 0;
  for (int i = 0; i < model.layers_size(); ++i) {
    const v1::Layer& layer = model.layers(i);
    absl::StrAppendFormat(&text, "%20s %25s %15s\n",
                          absl::StrCat(layer.type(), "-", i + 1),
                          absl::StrCat("[-1, ", layer.output_activations(), "]"),
                          WithThousands(layer.parameters()));
    total += layer.parameters();
  }
  absl::StrAppend(&text, double_rule, "\nTotal params: ", WithThousands(total),
                  "\nTrainable params: ", WithThousands(total),
                  "\nNon-trainable params: 0\n", rule, "\n");
  return text;
}

absl::StatusOr<v1::ModelDescription> AsSummarised(const v1::ModelDescription& model) {
  GPUEST_ASSIGN_OR_RETURN(
      v1::ModelDescription parsed,
      requests::ParseModelSummary(RenderTorchsummary(model), model.name()));
  v1::ModelDescription out = model;
  out.clear_trace();
  out.set_family(v1::MODEL_FAMILY_UNSPECIFIED);
  out.mutable_layers()->Swap(parsed.mutable_layers());
  return out;
}

}  // namespace gpuest::calibration
