// gpuest-replay-dump: replays every traced dataset row through the allocator
// simulation and prints one CSV line per row, for studying what the trace misses.
#include <cstdio>

#include "absl/flags/flag.h"
#include "common/flags.h"
#include "common/units.h"
#include "estimators/allocsim/layer_trace.h"
#include "estimators/allocsim/memory_model.h"
#include "estimators/allocsim/trace_replay.h"
#include "estimators/core/features.h"
#include "lab/calibration/calibration.h"
#include "lab/data/measured_rows.h"

ABSL_FLAG(std::string, jsonl, "", "rows from gpuest.synthetic.export --trace");
ABSL_FLAG(std::string, family, "", "mlp, cnn or transformer");
ABSL_FLAG(int, steps, 1, "training steps to replay (1: the first step only)");
ABSL_FLAG(bool, settle, false,
          "replay at least --steps, then on until the reserved peak settles, as the "
          "server does (ReplayUntilSettled)");
ABSL_FLAG(bool, from_layers, false,
          "replay the trace built from the layer sequence instead of the described one");

int main(int argc, char** argv) {
  gpuest::common::ParseFlags(
      argc, argv,
      {"gpuest-replay-dump --jsonl FILE --family F",
       "Replays traced dataset rows through the allocator simulation; CSV "
       "on stdout.",
       "", __FILE__});
  auto file = gpuest::data::ReadExportedRows(absl::GetFlag(FLAGS_jsonl));
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.status().ToString().c_str());
    return 2;
  }
  const std::string family = absl::GetFlag(FLAGS_family);
  std::printf(
      "family,file,batch,measured_mib,oom,params,activations,events,peak_alloc_mib,"
      "peak_reserved_mib,live_param,live_grad,live_opt,live_input,live_act,live_tmp,live_"
      "ws,"
      "max_conv_act_mib,uncertain_mib\n");
  constexpr double kMiB = gpuest::common::kMiB;  // Fractional MiB in the CSV.
  for (const gpuest::data::MeasuredRow& row : file->rows) {
    if (!row.model.has_trace() && !absl::GetFlag(FLAGS_from_layers)) continue;
    gpuest::allocsim::LayerStep step;
    if (absl::GetFlag(FLAGS_from_layers))
      step = gpuest::allocsim::StepFromLayers(row.model);
    const gpuest::v1::AllocationTrace& trace =
        absl::GetFlag(FLAGS_from_layers) ? step.trace : row.model.trace();
    const auto cublas = gpuest::allocsim::CublasWorkspaces(
        gpuest::allocsim::kDefaultCublasWorkspaceBytes);
    auto r = absl::GetFlag(FLAGS_settle)
                 ? gpuest::allocsim::ReplayUntilSettled(trace, {}, cublas,
                                                        absl::GetFlag(FLAGS_steps))
                 : gpuest::allocsim::ReplayTrace(trace, {}, cublas,
                                                 absl::GetFlag(FLAGS_steps));
    if (!r.ok()) continue;
    const auto f = gpuest::core::ExtractFeatures(row.model);
    const auto& c = r->live_at_peak;
    std::printf(
        "%s,%s,%lld,%.0f,%d,%lld,%lld,%d,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%."
        "1f,%.1f\n",
        family.c_str(), row.file_name.c_str(),
        static_cast<long long>(row.model.batch_size()), row.peak_mib, row.oom,
        static_cast<long long>(f.total_parameters()),
        static_cast<long long>(f.total_activations()), trace.size_bytes_size(),
        r->peak_allocated_bytes / kMiB, r->peak_reserved_bytes / kMiB, c[1] / kMiB,
        c[2] / kMiB, c[3] / kMiB, c[4] / kMiB, c[5] / kMiB, c[6] / kMiB, c[7] / kMiB,
        gpuest::allocsim::LargestConvOutputMib(row.model), step.uncertain_bytes / kMiB);
  }
  return 0;
}
