#include "estimators/gpumemnet/networks.h"

namespace gpuest::ml {

GpuMemNetImpl::GpuMemNetImpl(const NetworkConfig& config) : config_(config) {
  int trunk_input = config.global_features;
  if (config.sequence()) {
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
  if (config_.sequence()) {
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

ProbeInput MakeProbeInput(const NetworkConfig& config) {
  ProbeInput probe;
  probe.global.resize(config.global_features);
  for (size_t i = 0; i < probe.global.size(); ++i) {
    probe.global[i] = 0.5f - 0.25f * static_cast<float>(i % 5);
  }
  if (!config.sequence()) return probe;
  const int64_t n = 19;  // Blocks of 8 and a remainder.
  for (int64_t t = 0; t < n; ++t) {
    probe.sequence.types.push_back(t % config.vocabulary);
    probe.sequence.numbers.push_back(0.3f * static_cast<float>(t) - 1.0f);
    probe.sequence.numbers.push_back(0.8f - 0.2f * static_cast<float>(t));
  }
  return probe;
}

std::vector<float> ProbeLogits(GpuMemNet net, const ProbeInput& probe) {
  c10::InferenceMode inference;
  const torch::Device device = net->parameters().front().device();
  const int64_t g = static_cast<int64_t>(probe.global.size());
  const torch::Tensor global = torch::tensor(probe.global).reshape({1, g}).to(device);
  torch::Tensor logits;
  if (net->config().sequence()) {
    const int64_t n = static_cast<int64_t>(probe.sequence.types.size());
    logits = net->forward(
        global, torch::tensor(probe.sequence.types).reshape({1, n}).to(device),
        torch::tensor(probe.sequence.numbers).reshape({1, n, 2}).to(device),
        torch::zeros({1, n}, torch::kBool).to(device));
  } else {
    logits = net->forward(global);
  }
  logits = logits.to(torch::kCPU, torch::kFloat32).contiguous();
  return std::vector<float>(logits.data_ptr<float>(),
                            logits.data_ptr<float>() + logits.numel());
}

}  // namespace gpuest::ml
