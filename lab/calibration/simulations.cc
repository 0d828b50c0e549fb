#include "lab/calibration/simulations.h"

#include "common/status_macros.h"
#include "estimators/allocsim/layer_trace.h"

namespace gpuest::calibration {

using allocsim::TraceSource;

const std::vector<SimulationModel>& Simulations() {
  static const auto* simulations = new std::vector<SimulationModel>{
      {"allocsim", TraceSource::kRequest,
       "Replays the request's allocation trace (python3 -m gpuest.describe) through a "
       "simulation of PyTorch's CUDA caching allocator on the target GPU, plus the "
       "GPU's context and a per-family calibration on A100 measurements (or on the "
       "GPU's own clean runs, where the manifest holds terms for it: by_gpu)"},
      {"analytic", TraceSource::kLayers,
       "Builds one training step's allocations from the layer sequence by per-layer "
       "autograd rules and replays them through the caching-allocator simulation, plus "
       "the GPU's context and a per-family calibration on A100 measurements (or on the "
       "GPU's own clean runs, where the manifest holds terms for it: by_gpu)"}};
  return *simulations;
}

absl::StatusOr<std::map<std::string, allocsim::ReplayResult>> ReplayEach(
    const v1::ModelDescription& model, const core::GpuProfile& gpu, int steps) {
  std::map<std::string, allocsim::ReplayResult> replay;
  for (const SimulationModel& s : Simulations()) {
    const bool from_layers = s.trace_source == TraceSource::kLayers;
    allocsim::LayerStep step;
    if (from_layers) step = allocsim::StepFromLayers(model);
    GPUEST_ASSIGN_OR_RETURN(
        replay[s.id],
        allocsim::SimulatePeak(from_layers ? step.trace : model.trace(), gpu, {}, steps));
    replay[s.id].uncertain_bytes = step.uncertain_bytes;
  }
  return replay;
}

}  // namespace gpuest::calibration
