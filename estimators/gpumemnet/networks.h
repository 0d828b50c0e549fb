// File: networks.h
//
// The GPUMemNet networks as libtorch modules. Includes <torch/torch.h>: only the .cc
// files of the served estimator (gpumemnet_estimator.cc) and of the trainer include
// this header, never a header that the server, client or engine include.
//
// One module covers both kinds (NetworkConfig::kind):
//   "mlp":         global features -> MLP trunk -> all heads' logits;
//   "transformer": per-layer tokens (type embedding + linear projection of the two
//                  numbers) -> TransformerEncoder -> masked mean pooling, concatenated
//                  with the global features -> MLP trunk -> all heads' logits.
// The heads are one Linear whose outputs are the heads' classes one after another
// (NetworkConfig::head_classes): one network per ensemble member answers every target.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "estimators/gpumemnet/feature_encoding.h"
#include "estimators/gpumemnet/network_config.h"

namespace gpuest::ml {

class GpuMemNetImpl : public torch::nn::Module {
 public:
  explicit GpuMemNetImpl(const NetworkConfig& config);

  // global: [B, G] float. The Transformer-based kind also takes types [B, L] int64,
  // numbers [B, L, 2] float and padding [B, L] bool (true where there is no layer;
  // every row needs at least one layer). Returns [B, total_classes] logits.
  torch::Tensor forward(const torch::Tensor& global, const torch::Tensor& types = {},
                        const torch::Tensor& numbers = {},
                        const torch::Tensor& padding = {});

  const NetworkConfig& config() const { return config_; }

  // The MLP trunk's Linear layers (each followed by ReLU, then dropout) and last the
  // heads' Linear: what a plain C++ forward of an MLP-based member needs.
  std::vector<torch::nn::Linear> DenseLayers() const;

 private:
  NetworkConfig config_;
  torch::nn::Embedding type_embedding_{nullptr};
  torch::nn::Linear number_projection_{nullptr};
  torch::nn::TransformerEncoder encoder_{nullptr};
  torch::nn::Sequential trunk_{nullptr};
  std::vector<torch::nn::Linear> trunk_linears_;
  torch::nn::Linear heads_{nullptr};
};
TORCH_MODULE(GpuMemNet);

// A fixed input that reaches every part of a network of this config (every token type,
// enough tokens for the plain attention loops' blocks of 8 and their remainder), for
// checking a member at load: its logits must be finite, and the plain forward must
// give the same ones.
struct ProbeInput {
  std::vector<float> global;
  EncodedSequence sequence;  // Empty for the MLP-based kind.
};
ProbeInput MakeProbeInput(const NetworkConfig& config);

// The module's logits for the probe, on the CPU: total_classes floats.
std::vector<float> ProbeLogits(GpuMemNet net, const ProbeInput& probe);

}  // namespace gpuest::ml
