// gpuest-fit-contention: fits the contention model on Lucid's colocation measurements
// and writes models/contention/contention.json (coefficients, interval, accuracy and
// how it was made) and a Markdown report of the leave-model-out table.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_join.h"
#include "common/flags.h"
#include "lab/contention/contention_fit.h"

ABSL_FLAG(std::string, lucid_dir, "../shared/data/lucid",
          "single.csv and colocation.csv");
ABSL_FLAG(std::string, gpumemnet_dir, "../shared/data/gpumemnet",
          "mlp.csv and cnn.csv, for the SMACT -> utilization.gpu map");
ABSL_FLAG(std::string, models, "models",
          "model repository: writes contention/contention.json and contention/report.md");
ABSL_FLAG(double, ridge, 1e-3, "ridge on the weights (not the bias), per row");

int main(int argc, char** argv) {
  const gpuest::common::ProgramUsage usage{
      "gpuest-fit-contention [flags]",
      "Fits and validates (leave-model-out) the contention model served by placement.",
      "", __FILE__};
  gpuest::common::ParseFlags(argc, argv, usage);
  gpuest::contention::FitOptions options;
  options.lucid_dir = absl::GetFlag(FLAGS_lucid_dir);
  options.gpumemnet_dir = absl::GetFlag(FLAGS_gpumemnet_dir);
  options.ridge = absl::GetFlag(FLAGS_ridge);
  std::vector<std::string> args(argv, argv + argc);
  args[0] = "gpuest-fit-contention";
  options.command = absl::StrJoin(args, " ");
  auto result = gpuest::contention::FitContention(options);
  if (!result.ok()) {
    std::fprintf(stderr, "gpuest-fit-contention: %s\n",
                 result.status().ToString().c_str());
    return 1;
  }
  const std::string path = gpuest::core::ContentionModelPath(absl::GetFlag(FLAGS_models));
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::filesystem::create_directories(dir);
  std::ofstream model_out(path);
  model_out << result->model.ToJson().dump(2) << "\n";
  const std::string table = gpuest::contention::RenderTable(*result);
  std::ofstream report_out(dir + "/report.md");
  report_out << "# Contention model: leave-model-out accuracy\n\n"
             << "Written by `" << options.command << "`.\n\n"
             << table;
  model_out.close();
  report_out.close();
  if (!model_out || !report_out) {
    std::fprintf(stderr, "gpuest-fit-contention: cannot write %s or its report\n",
                 path.c_str());
    return 1;
  }
  std::cout << table;
  std::printf(
      "served: verdict at P(below %.2f) >= %.3f; SMACT map MAE %.4f over %d rows\n",
      result->model.bad_threshold, result->model.verdict_probability, result->smact_mae,
      result->smact_rows);
  return 0;
}
