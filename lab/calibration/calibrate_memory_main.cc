// gpuest-calibrate-memory: calibrates the simulation estimators (allocsim, analytic) on
// GPUMemNet's training split, optionally writes them into the model repository, and
// scores them beside GPUMemNet and Horus on the held-out split (memory_calibration.h says
// how).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/status_macros.h"
#include "lab/calibration/memory_calibration.h"
#include "lab/trainer/report_sections.h"

ABSL_FLAG(std::string, data_dir, "../shared/data/gpumemnet", "the GPUMemNet CSVs");
ABSL_FLAG(std::string, datasets_dir, "build/datasets",
          "exporter output: <family>_traced.jsonl (with --trace) and transformer.jsonl");
ABSL_FLAG(std::string, models, "models",
          "model repository: GPUMemNet estimators and gpu_profiles.json are read here");
ABSL_FLAG(bool, write_models, false,
          "write the calibrated allocsim/ and analytic/ estimators and the A100's "
          "calibrated constants into --models");
ABSL_FLAG(bool, score_models, false,
          "score the allocsim/ and analytic/ manifests in --models as they are (the "
          "shipped models) instead of this run's fits, which the report shows for "
          "comparison only; not with --write-models");
ABSL_FLAG(int, steps, 2, "training steps replayed (2: first step, then steady state)");
ABSL_FLAG(double, safe_quantile, 0.95,
          "share of training rows the upper bound keeps safe");
ABSL_FLAG(uint64_t, seed, 2025, "GPUMemNet's split seed (see its manifests)");
ABSL_FLAG(double, test_fraction, 0.3, "GPUMemNet's held-out fraction");
ABSL_FLAG(std::string, training_rows_csv, "",
          "for studying what the simulation misses: write the training rows' simulated "
          "and measured peaks here (held-out rows are never written)");
ABSL_FLAG(std::string, gpu_runs, "",
          "GPU=FILE: clean runs measured on that GPU (cuDNN benchmark off, uncapped; "
          "lab/data/export_clean_runs.py) calibrate its own terms, served for it "
          "in place of the A100's, family by family, and reported out of group "
          "(e.g. h200=build/datasets/h200_clean_runs.jsonl)");
ABSL_FLAG(bool, clean_terms_for_every_gpu, true,
          "with --gpu-runs: its clean runs' terms serve every GPU for the families they "
          "calibrate (false: that GPU only, as by_gpu)");
ABSL_FLAG(std::vector<std::string>, holdout_runs, {},
          "GPU=FILE,...: clean runs no fit sees (exported as for --gpu-runs), scored for "
          "the bound's goal table with the served estimators and that GPU's profile "
          "(e.g. h100-80gb=build/datasets/h100_clean_runs.jsonl)");
ABSL_FLAG(std::string, real_rows_csv, "",
          "with --timm-rows, for studying what the estimators miss on real models: "
          "write each real row's status, measured and simulated peaks and the served "
          "upper bounds, as scored in the report, here");
ABSL_FLAG(std::string, timm_rows, "",
          "the timm measurements described with a trace (lab/data/describe_timm.py): "
          "the report gains their leave-architecture-group-out table (the served "
          "calibration and the candidate it was chosen over)");
ABSL_FLAG(
    std::string, fit_real_models, "where-unsafe-or-tighter",
    "with --timm-rows, which families serve the out-of-group fit: where-unsafe "
    "(where the fit on GPUMemNet alone keeps fewer than --safe-quantile of the real "
    "rows safe), where-unsafe-or-tighter (also where the out-of-group fit keeps "
    "--safe-quantile of them safe, more of them safe and tight, and as many of their "
    "out-of-memory runs above the card), always, or never");
ABSL_FLAG(double, max_conv_output_factor, 12,
          "the CNN out-of-group upper bound's term for cuDNN's workspaces: factors of "
          "the largest convolution output tried, 0 to this in steps of 0.5 (0: no term)");
ABSL_FLAG(
    std::string, report, "",
    "replace the simulation section of this report (docs/accuracy.md); empty prints "
    "the section on stdout");

namespace {

using gpuest::calibration::MemoryCalibrationOptions;
using gpuest::calibration::RealModelFit;

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "gpuest-calibrate-memory: %s\n", s.ToString().c_str());
  return 1;
}

absl::StatusOr<RealModelFit> RealModelFitOf(const std::string& fit) {
  if (fit == "where-unsafe-or-tighter") return RealModelFit::kWhereUnsafeOrTighter;
  if (fit == "where-unsafe") return RealModelFit::kWhereUnsafe;
  if (fit == "always") return RealModelFit::kAlways;
  if (fit == "never") return RealModelFit::kNever;
  return absl::InvalidArgumentError(absl::StrCat(
      "--fit-real-models must be where-unsafe-or-tighter, where-unsafe, always or "
      "never, not '",
      fit, "'"));
}

// The calibration's options from the flags; InvalidArgument names a bad one.
absl::StatusOr<MemoryCalibrationOptions> OptionsFromFlags() {
  MemoryCalibrationOptions options;
  options.data_dir = absl::GetFlag(FLAGS_data_dir);
  options.datasets_dir = absl::GetFlag(FLAGS_datasets_dir);
  options.models_dir = absl::GetFlag(FLAGS_models);
  options.write_models = absl::GetFlag(FLAGS_write_models);
  options.score_models = absl::GetFlag(FLAGS_score_models);
  if (options.write_models && options.score_models) {
    return absl::InvalidArgumentError(
        "--score-models scores the manifests in --models as they are: it cannot be "
        "given with --write-models, which replaces them");
  }
  options.steps = absl::GetFlag(FLAGS_steps);
  options.safe_quantile = absl::GetFlag(FLAGS_safe_quantile);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.test_fraction = absl::GetFlag(FLAGS_test_fraction);
  options.training_rows_csv = absl::GetFlag(FLAGS_training_rows_csv);
  options.real_rows_csv = absl::GetFlag(FLAGS_real_rows_csv);
  options.gpu_runs = absl::GetFlag(FLAGS_gpu_runs);
  options.clean_terms_for_every_gpu = absl::GetFlag(FLAGS_clean_terms_for_every_gpu);
  options.holdout_runs = absl::GetFlag(FLAGS_holdout_runs);
  options.timm_rows = absl::GetFlag(FLAGS_timm_rows);
  options.max_conv_output_factor = absl::GetFlag(FLAGS_max_conv_output_factor);
  if (!(options.max_conv_output_factor >= 0)) {
    return absl::InvalidArgumentError(
        "--max-conv-output-factor must be at least 0 (0 leaves the conv term out)");
  }
  GPUEST_ASSIGN_OR_RETURN(options.fit_real_models,
                          RealModelFitOf(absl::GetFlag(FLAGS_fit_real_models)));
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  gpuest::common::ParseFlags(
      argc, argv,
      {"gpuest-calibrate-memory [flags]",
       "Calibrates the allocator-simulation estimators (allocsim, analytic) on "
       "GPUMemNet's\n"
       "training split, optionally writes them into the model repository "
       "(--write-models),\n"
       "and scores them, GPUMemNet's MLP-based classifiers and the Horus formula on "
       "the\n"
       "held-out split; with --timm-rows, real models are scored leaving whole\n"
       "architecture groups out and, where the fit on GPUMemNet alone is unsafe on\n"
       "them, join the fit (--fit-real-models).\n"
       "deploy/calibrate-memory.sh runs the whole thing, exports included.",
       "", __FILE__});
  const absl::StatusOr<MemoryCalibrationOptions> options = OptionsFromFlags();
  if (!options.ok()) return Fail(options.status());
  const absl::StatusOr<std::string> section =
      gpuest::calibration::CalibrateMemory(*options);
  if (!section.ok()) return Fail(section.status());

  const std::string report = absl::GetFlag(FLAGS_report);
  if (report.empty()) {
    std::fputs(section->c_str(), stdout);
    return 0;
  }
  const absl::Status written = gpuest::trainer::WriteReportFile(
      report, gpuest::trainer::ReportHead(report),
      absl::StrCat(gpuest::trainer::kSimulationMarker, "\n\n", *section));
  return written.ok() ? 0 : Fail(written);
}
