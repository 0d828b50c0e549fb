#include "estimators/gpumemnet/networks.h"

namespace gpuest::gpumemnet {

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

}  // namespace gpuest::gpumemnet
