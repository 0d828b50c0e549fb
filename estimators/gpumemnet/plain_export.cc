#include "estimators/gpumemnet/plain_export.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace gpuest::gpumemnet {
namespace {

std::vector<float> Floats(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

DenseLayer Dense(const torch::Tensor& weight, const torch::Tensor& bias, bool relu) {
  DenseLayer d;
  d.out = static_cast<int>(weight.size(0));
  d.in = static_cast<int>(weight.size(1));
  d.weight_t = Floats(weight.t());
  d.bias = Floats(bias);
  d.relu = relu;
  return d;
}

// The MLP trunk and the heads: ReLU after every layer but the last.
DenseNet ToDense(const GpuMemNet& net) {
  DenseNet dense;
  const std::vector<torch::nn::Linear> layers = net->DenseLayers();
  for (size_t l = 0; l < layers.size(); ++l) {
    dense.push_back(Dense(layers[l]->weight, layers[l]->bias, l + 1 < layers.size()));
  }
  return dense;
}

absl::StatusOr<torch::Tensor> Parameter(const GpuMemNet& net, const std::string& name) {
  const auto params = net->named_parameters(/*recurse=*/true);
  if (const torch::Tensor* t = params.find(name)) return *t;
  return absl::InvalidArgumentError(absl::StrCat("network has no parameter ", name));
}

absl::StatusOr<DenseLayer> LinearFrom(const GpuMemNet& net, const std::string& weight,
                                      const std::string& bias, bool relu) {
  GPUEST_ASSIGN_OR_RETURN(torch::Tensor w, Parameter(net, weight));
  GPUEST_ASSIGN_OR_RETURN(torch::Tensor b, Parameter(net, bias));
  return Dense(w, b, relu);
}

absl::StatusOr<PlainNet> ToPlain(const GpuMemNet& net) {
  PlainNet p;
  p.trunk = ToDense(net);
  const NetworkConfig& c = net->config();
  if (!c.sequence()) return p;
  p.d = c.d_model;
  GPUEST_ASSIGN_OR_RETURN(torch::Tensor emb, Parameter(net, "type_embedding.weight"));
  p.embedding = Floats(emb);
  GPUEST_ASSIGN_OR_RETURN(p.projection, LinearFrom(net, "number_projection.weight",
                                                   "number_projection.bias", false));
  for (int l = 0; l < c.encoder_layers; ++l) {
    const std::string at = absl::StrCat("encoder.layers.", l, ".");
    EncoderLayer e;
    e.heads = c.attention_heads;
    e.feedforward = c.feedforward;
    GPUEST_ASSIGN_OR_RETURN(e.in_proj, LinearFrom(net, at + "self_attn.in_proj_weight",
                                                  at + "self_attn.in_proj_bias", false));
    GPUEST_ASSIGN_OR_RETURN(e.out_proj,
                            LinearFrom(net, at + "self_attn.out_proj.weight",
                                       at + "self_attn.out_proj.bias", false));
    GPUEST_ASSIGN_OR_RETURN(
        e.linear1, LinearFrom(net, at + "linear1.weight", at + "linear1.bias", true));
    GPUEST_ASSIGN_OR_RETURN(
        e.linear2, LinearFrom(net, at + "linear2.weight", at + "linear2.bias", false));
    for (auto [name, out] :
         {std::pair{"norm1.weight", &e.norm1_w}, std::pair{"norm1.bias", &e.norm1_b},
          std::pair{"norm2.weight", &e.norm2_w}, std::pair{"norm2.bias", &e.norm2_b}}) {
      GPUEST_ASSIGN_OR_RETURN(torch::Tensor t, Parameter(net, at + name));
      *out = Floats(t);
    }
    p.layers.push_back(std::move(e));
  }
  return p;
}

}  // namespace

absl::StatusOr<PlainNet> ExportPlainNet(GpuMemNet net) {
  GPUEST_ASSIGN_OR_RETURN(PlainNet plain, ToPlain(net));
  // The plain forward must agree with the module: checked on a probe input.
  const ProbeInput probe = MakeProbeInput(net->config());
  const std::vector<float> fast = PlainForward(plain, probe.global, probe.sequence);
  const std::vector<float> slow = ProbeLogits(net, probe);
  if (fast.size() != slow.size()) {
    return absl::InvalidArgumentError("plain forward: wrong number of logits");
  }
  for (size_t k = 0; k < fast.size(); ++k) {
    const float want = slow[k];
    if (std::abs(fast[k] - want) > 1e-3f * (1.0f + std::abs(want))) {
      return absl::InvalidArgumentError(
          absl::StrCat("plain forward disagrees with the module: logit ", k, " is ",
                       fast[k], ", the module says ", want));
    }
  }
  return plain;
}

}  // namespace gpuest::gpumemnet
