#include "estimators/gpumemnet/network_module.h"

namespace gpuest::gpumemnet {

GpuMemNetModuleImpl::GpuMemNetModuleImpl(const NetworkShape& shape) : shape_(shape) {
  int trunk_input = shape.global_features;
  if (shape.sequence()) {
    type_embedding_ = register_module(
        "type_embedding", torch::nn::Embedding(shape.vocabulary, shape.d_model));
    number_projection_ =
        register_module("number_projection", torch::nn::Linear(2, shape.d_model));
    encoder_ = register_module(
        "encoder", torch::nn::TransformerEncoder(torch::nn::TransformerEncoderOptions(
                       torch::nn::TransformerEncoderLayerOptions(shape.d_model,
                                                                 shape.attention_heads)
                           .dim_feedforward(shape.feedforward)
                           .dropout(shape.dropout),
                       shape.encoder_layers)));
    trunk_input += shape.d_model;
  }
  trunk_ = register_module("trunk", torch::nn::Sequential());
  for (int width : shape.hidden) {
    trunk_linears_.emplace_back(trunk_input, width);
    trunk_->push_back(trunk_linears_.back());
    trunk_->push_back(torch::nn::ReLU());
    trunk_->push_back(torch::nn::Dropout(shape.dropout));
    trunk_input = width;
  }
  heads_ =
      register_module("heads", torch::nn::Linear(trunk_input, shape.total_classes()));
}

std::vector<torch::nn::Linear> GpuMemNetModuleImpl::DenseLayers() const {
  std::vector<torch::nn::Linear> layers = trunk_linears_;
  layers.push_back(heads_);
  return layers;
}

torch::Tensor GpuMemNetModuleImpl::forward(const torch::Tensor& global,
                                           const torch::Tensor& types,
                                           const torch::Tensor& numbers,
                                           const torch::Tensor& padding) {
  torch::Tensor x = global;
  if (shape_.sequence()) {
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

}  // namespace gpuest::gpumemnet
