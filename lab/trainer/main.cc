// gpuest-train: trains the GPUMemNet / GPUUtilNet ensembles from the measured datasets,
// writes them to a model repository and the accuracy report.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/flags.h"
#include "lab/data/dataset.h"
#include "lab/trainer/pipeline.h"
#include "lab/trainer/report.h"
#include "lab/trainer/train.h"

ABSL_FLAG(std::string, out, "models", "model repository to write gpumemnet-* into");
ABSL_FLAG(std::string, report, "",
          "write the accuracy report (markdown) here from every gpumemnet-* manifest in "
          "--out; empty: no report");
ABSL_FLAG(bool, report_only, false, "only rewrite --report from the manifests in --out");
ABSL_FLAG(std::string, families, "mlp,cnn,transformer", "families to train");
ABSL_FLAG(std::string, kinds, "mlp,transformer",
          "estimator kinds to train: mlp (MLP-based), transformer (Transformer-based)");
ABSL_FLAG(std::string, data_dir, "../shared/data/gpumemnet",
          "directory of mlp.csv, cnn.csv and transformer_sample.csv");
ABSL_FLAG(std::string, transformer_rows, "build/datasets/transformer.jsonl",
          "the Transformer sample as JSON lines from python3 -m gpuest.synthetic.export");
ABSL_FLAG(uint64_t, seed, 2025, "seed of the split, the folds and the members");
ABSL_FLAG(int, members, 5, "ensemble members per estimator");
ABSL_FLAG(int, mlp_epochs, 150, "epochs of each MLP-based member");
ABSL_FLAG(int, transformer_epochs, 30, "epochs of each Transformer-based member");
ABSL_FLAG(bool, smoke, false,
          "a few hundred rows per family, 2 epochs, 2 members: proves the pipeline, not "
          "a shipped model");

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "gpuest-train: %s\n", std::string(status.message()).c_str());
  return 1;
}

// The pipeline's options from the flags; none (said on stderr) for an unknown kind.
std::optional<gpuest::trainer::PipelineOptions> PipelineOptionsFromFlags() {
  gpuest::trainer::PipelineOptions options;
  options.out_dir = absl::GetFlag(FLAGS_out);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.members = absl::GetFlag(FLAGS_members);
  options.mlp_epochs = absl::GetFlag(FLAGS_mlp_epochs);
  options.transformer_epochs = absl::GetFlag(FLAGS_transformer_epochs);
  options.smoke = absl::GetFlag(FLAGS_smoke);
  if (options.smoke) options.members = std::min(options.members, 2);
  options.kinds.clear();
  for (absl::string_view word :
       absl::StrSplit(absl::GetFlag(FLAGS_kinds), ',', absl::SkipEmpty())) {
    std::optional<gpuest::gpumemnet::NetworkKind> kind =
        gpuest::gpumemnet::NetworkKindFromName(word);
    if (!kind) {
      std::fprintf(stderr, "gpuest-train: --kinds: unknown kind '%s'\n",
                   std::string(word).c_str());
      return std::nullopt;
    }
    options.kinds.push_back(*kind);
  }
  return options;
}

// The dataset of one --families name; none for an unknown name.
std::optional<absl::StatusOr<gpuest::data::Dataset>> LoadFamily(
    absl::string_view family, const std::string& data_dir) {
  if (family == "mlp") {
    return gpuest::data::LoadCsvDataset(data_dir + "/mlp.csv",
                                        gpuest::v1::MODEL_FAMILY_MLP);
  }
  if (family == "cnn") {
    return gpuest::data::LoadCsvDataset(data_dir + "/cnn.csv",
                                        gpuest::v1::MODEL_FAMILY_CNN);
  }
  if (family == "transformer") {
    return gpuest::data::LoadExportedDataset(absl::GetFlag(FLAGS_transformer_rows),
                                             data_dir + "/transformer_sample.csv");
  }
  return std::nullopt;
}

// Trains every family of --families into --out; the exit code.
int TrainFamilies() {
  const std::optional<gpuest::trainer::PipelineOptions> options =
      PipelineOptionsFromFlags();
  if (!options) return 2;
  std::error_code ec;
  std::filesystem::create_directories(options->out_dir, ec);
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  const absl::Time start = absl::Now();
  for (absl::string_view family :
       absl::StrSplit(absl::GetFlag(FLAGS_families), ',', absl::SkipEmpty())) {
    std::optional<absl::StatusOr<gpuest::data::Dataset>> data =
        LoadFamily(family, data_dir);
    if (!data) {
      std::fprintf(stderr, "gpuest-train: --families: unknown family '%s'\n",
                   std::string(family).c_str());
      return 2;
    }
    if (!data->ok()) return Fail(data->status());
    std::fprintf(stderr, "%s: %zu rows used of %lld\n", std::string(family).c_str(),
                 (*data)->examples.size(), static_cast<long long>((*data)->rows));
    if (absl::Status s = gpuest::trainer::TrainFamily(**data, *options); !s.ok()) {
      return Fail(s);
    }
  }
  std::fprintf(stderr, "trained in %.1f min\n",
               absl::ToDoubleMinutes(absl::Now() - start));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  gpuest::common::ParseFlags(
      argc, argv,
      {"gpuest-train [flags]",
       "Trains the GPUMemNet (memory bins) and GPUUtilNet (utilization classes) "
       "ensembles, an MLP-based and a Transformer-based one per family, with a "
       "stratified 30 % held-out split and 3-fold cross-validation on the rest, and "
       "writes models/gpumemnet-<family>-<kind>/ (member weights + manifest.json) and "
       "the "
       "accuracy report. Deterministic on the CPU for a seed.",
       "Retrain everything and rewrite the report: deploy/train.sh", __FILE__});
  const std::string out = absl::GetFlag(FLAGS_out);
  const std::string report = absl::GetFlag(FLAGS_report);
  const std::string command_line = absl::StrJoin(args, " ");

  if (!absl::GetFlag(FLAGS_report_only)) {
    gpuest::trainer::UseOneThread();
    if (const int code = TrainFamilies(); code != 0) return code;
  }
  if (!report.empty()) {
    if (absl::Status s = gpuest::trainer::WriteReport(out, report, command_line);
        !s.ok()) {
      return Fail(s);
    }
    std::fprintf(stderr, "wrote %s\n", report.c_str());
  }
  return 0;
}
