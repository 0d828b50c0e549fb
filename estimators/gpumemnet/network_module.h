// File: network_module.h
//
// The GPUMemNet network as a libtorch module, built from a NetworkShape: the served
// estimator's members (networks.h wraps it with the manifest's config) and the
// standalone check lab/gpu/ml_check run this same code. It includes libtorch and
// standard C++ only.
//
// One module covers both kinds (NetworkShape::kind):
//   "mlp":         global features -> MLP trunk -> all heads' logits;
//   "transformer": per-layer tokens (type embedding + linear projection of the two
//                  numbers) -> TransformerEncoder -> masked mean pooling, concatenated
//                  with the global features -> MLP trunk -> all heads' logits.
// The heads are one Linear whose outputs are the heads' classes one after another
// (NetworkShape::head_classes): one network per ensemble member answers every target.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "estimators/gpumemnet/network_shape.h"

namespace gpuest::gpumemnet {

class GpuMemNetModuleImpl : public torch::nn::Module {
 public:
  explicit GpuMemNetModuleImpl(const NetworkShape& shape);

  // global: [B, G] float. The Transformer-based kind also takes types [B, L] int64,
  // numbers [B, L, 2] float and padding [B, L] bool (true where there is no layer;
  // every row needs at least one layer). Returns [B, total_classes] logits.
  torch::Tensor forward(const torch::Tensor& global, const torch::Tensor& types = {},
                        const torch::Tensor& numbers = {},
                        const torch::Tensor& padding = {});

  const NetworkShape& shape() const { return shape_; }

  // The MLP trunk's Linear layers (each followed by ReLU, then dropout) and last the
  // heads' Linear: what a plain C++ forward of an MLP-based member needs.
  std::vector<torch::nn::Linear> DenseLayers() const;

 private:
  NetworkShape shape_;
  torch::nn::Embedding type_embedding_{nullptr};
  torch::nn::Linear number_projection_{nullptr};
  torch::nn::TransformerEncoder encoder_{nullptr};
  torch::nn::Sequential trunk_{nullptr};
  std::vector<torch::nn::Linear> trunk_linears_;
  torch::nn::Linear heads_{nullptr};
};
TORCH_MODULE(GpuMemNetModule);

}  // namespace gpuest::gpumemnet
