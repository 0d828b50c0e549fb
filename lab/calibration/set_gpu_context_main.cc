// gpuest-set-gpu-context: sets one GPU's CUDA context in models/gpu_profiles.json from
// measurements made on it, through GpuProfilesManifest::SetMeasuredContext, the one
// writer of that file (gpuest-calibrate-memory uses it in process). gpuest-collect
// calibrate computes the figure from its rows and runs this to write it.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "common/flags.h"
#include "common/text_file.h"
#include "estimators/core/gpu_profiles_manifest.h"

ABSL_FLAG(std::string, profiles, "models/gpu_profiles.json", "the file to rewrite");
ABSL_FLAG(std::string, gpu, "", "the GPU's id in the file (h100-80gb, h200, ...)");
ABSL_FLAG(std::string, measured_on, "",
          "the GPU name the measurements report (nvidia-smi's); refused unless it is the "
          "profile's name");
ABSL_FLAG(double, context_mib, -1, "the measured context in MiB");
ABSL_FLAG(std::string, basis, "",
          "how the figure was measured, for the profile's constants_basis");

int main(int argc, char** argv) {
  gpuest::common::ParseFlags(
      argc, argv,
      {"gpuest-set-gpu-context --gpu ID --context-mib N --basis TEXT [flags]",
       "Sets one GPU's CUDA context in gpu_profiles.json from measurements made on it:\n"
       "its context_mib, its constants \"calibrated\", and the context part of its\n"
       "constants_basis (the cuBLAS workspace part is kept). gpuest-collect calibrate\n"
       "runs it; the file is rewritten whole, or not at all.",
       "", __FILE__});
  const std::string path = absl::GetFlag(FLAGS_profiles);
  auto fail = [](const std::string& what) {
    std::fprintf(stderr, "gpuest-set-gpu-context: %s\n", what.c_str());
    return 2;
  };
  if (absl::GetFlag(FLAGS_gpu).empty()) return fail("--gpu: give the GPU's id");
  if (absl::GetFlag(FLAGS_basis).empty()) return fail("--basis: say how it was measured");
  absl::StatusOr<gpuest::core::GpuProfilesManifest> profiles =
      gpuest::core::GpuProfilesManifest::Load(path);
  if (!profiles.ok()) return fail(std::string(profiles.status().message()));
  const absl::Status set = profiles->SetMeasuredContext(
      absl::GetFlag(FLAGS_gpu), absl::GetFlag(FLAGS_measured_on),
      absl::GetFlag(FLAGS_context_mib), absl::GetFlag(FLAGS_basis),
      /*assumed_too=*/false);
  if (!set.ok()) return fail(std::string(set.message()));
  const absl::Status written = gpuest::common::WriteTextFile(path, profiles->Text());
  if (!written.ok()) return fail(std::string(written.message()));
  std::fprintf(stderr, "%s: %s context %.0f MiB\n", path.c_str(),
               absl::GetFlag(FLAGS_gpu).c_str(), absl::GetFlag(FLAGS_context_mib));
  return 0;
}
