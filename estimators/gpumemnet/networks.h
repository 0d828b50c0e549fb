// File: networks.h
//
// The GPUMemNet networks as the served estimator and the trainer hold them: the module
// of network_module.h with the manifest's config. Includes <torch/torch.h>: only the
// .cc files of the served estimator (gpumemnet_estimator.cc) and of the trainer
// include this header, never a header that the server, client or engine include.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "estimators/gpumemnet/feature_encoding.h"
#include "estimators/gpumemnet/network_config.h"
#include "estimators/gpumemnet/network_module.h"

namespace gpuest::gpumemnet {

class GpuMemNetImpl : public GpuMemNetModuleImpl {
 public:
  explicit GpuMemNetImpl(const NetworkConfig& config)
      : GpuMemNetModuleImpl(config), config_(config) {}

  const NetworkConfig& config() const { return config_; }

 private:
  NetworkConfig config_;
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

}  // namespace gpuest::gpumemnet
