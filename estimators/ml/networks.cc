#include "estimators/ml/networks.h"

namespace gpuest::ml {

GpuMemNetImpl::GpuMemNetImpl(const NetworkConfig& config) : config_(config) {
  int trunk_input = config.global_features;
  if (config.kind == "transformer") {
    type_embedding_ = register_module(
        "type_embedding", torch::nn::Embedding(config.vocabulary, config.d_model));
    number_projection_ =
        register_module("number_projection", torch::nn::Linear(2, config.d_model));
    encoder_ = register_module(
        "encoder", torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(
                       torch::nn::TransformerEncoderLayerOptions(config.d_model,
                                                                 config.attention_heads)
                           .dim_feedforward(config.feedforward)
                           .dropout(config.dropout),
                       config.encoder_layers)));
    trunk_input += config.d_model;
  }
  trunk_ = register_module("trunk", torch::nn::Sequential());
  for (int width : config.hidden) {
    trunk_linears_.emplace_back(trunk_input, width);
    trunk_->push_back(trunk_linears_.back());
    trunk_->push_back(torch::nn::ReLU());
    trunk_->push_back(torch::nn::Dropout(config.dropout));
    trunk_input = width;
  }
  heads_ =
      register_module("heads", torch::nn::Linear(trunk_input, config.total_classes()));
}

std::vector<torch::nn::Linear> GpuMemNetImpl::DenseLayers() const {
  std::vector<torch::nn::Linear> layers = trunk_linears_;
  layers.push_back(heads_);
  return layers;
}

torch::Tensor GpuMemNetImpl::forward(const torch::Tensor& global,
                                     const torch::Tensor& types,
                                     const torch::Tensor& numbers,
                                     const torch::Tensor& padding) {
  torch::Tensor x = global;
  if (config_.kind == "transformer") {
    // [B, L, d] -> the encoder's [L, B, d] and back.
    torch::Tensor tokens = type_embedding_(types) + number_projection_(numbers);
    torch::Tensor encoded =
        encoder_->forward(tokens.transpose(0, 1), torch::Tensor(), padding)
            .transpose(0, 1);
    torch::Tensor valid = padding.logical_not().unsqueeze(-1).to(encoded.dtype());
    torch::Tensor pooled = (encoded * valid).sum(1) / valid.sum(1).clamp_min(1.0);
    x = torch::cat({pooled, global}, 1);
  }
  return heads_(trunk_->forward(x));
}

}  // namespace gpuest::ml
