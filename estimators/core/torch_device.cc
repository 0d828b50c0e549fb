#include "estimators/core/torch_device.h"

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include "absl/strings/str_cat.h"

namespace gpuest::core {

absl::StatusOr<std::string> ResolveDevice(const std::string& requested) {
  if (requested != "auto" && requested != "cpu" && requested != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", requested, "': want auto|cpu|cuda"));
  }
  if (requested == "cpu") return std::string("cpu");
  bool cuda = false;
  try {
    cuda = torch::cuda::is_available();
  } catch (const std::exception& e) {
    if (requested == "cuda") {
      return absl::FailedPreconditionError(absl::StrCat("CUDA check failed: ", e.what()));
    }
  }
  if (cuda) return std::string("cuda");
  if (requested == "cuda") {
    return absl::FailedPreconditionError(
        "device 'cuda' requested, but libtorch sees no CUDA device (this libtorch may be "
        "a CPU-only build)");
  }
  return std::string("cpu");
}

void UseOneIntraOpThread() { at::set_num_threads(1); }

}  // namespace gpuest::core
