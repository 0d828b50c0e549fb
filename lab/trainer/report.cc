#include "lab/trainer/report.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/model_family.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "estimators/gpumemnet/gpumemnet_manifest.h"
#include "lab/trainer/classification_scores.h"
#include "lab/trainer/report_sections.h"

namespace gpuest::trainer {
namespace {

using gpumemnet::GpuMemNetManifest;

std::string F3(double x) { return absl::StrFormat("%.3f", x); }

std::string Dataset(v1::ModelFamily family) {
  if (family == v1::MODEL_FAMILY_MLP) return "MLP (mlp.csv)";
  if (family == v1::MODEL_FAMILY_CNN) return "CNN (cnn.csv)";
  return "Transformer (transformer_sample.csv)";
}

std::string Estimator(const GpuMemNetManifest& m) {
  return m.kind == gpumemnet::NetworkKind::kMlp ? "MLP-based" : "Transformer-based";
}

// The paper's held-out accuracy, for (family, kind, width in GiB); its bins are 1000
// MiB multiples ("GB"), ours GiB.
std::string PaperMemory(v1::ModelFamily family, gpumemnet::NetworkKind kind, int width) {
  // The paper gives one range for the MLP data, not per estimator.
  if (family == v1::MODEL_FAMILY_MLP && (width == 1 || width == 2)) {
    return "0.95-0.97 (1-2 GB)";
  }
  if (width != 8) return "-";
  const bool mlp = kind == gpumemnet::NetworkKind::kMlp;
  if (family == v1::MODEL_FAMILY_CNN) return mlp ? "0.83 (8 GB)" : "0.81 (8 GB)";
  if (family == v1::MODEL_FAMILY_TRANSFORMER) return mlp ? "0.88 (8 GB)" : "0.86 (8 GB)";
  return "-";
}

std::string PaperUtilization(v1::ModelFamily family, const std::string& metric) {
  if (family == v1::MODEL_FAMILY_CNN && metric == "SMACT") return "0.77";
  return "not found";
}

std::string Edges(const gpumemnet::HeadSpec& head) {
  std::vector<std::string> parts;
  for (double e : head.edges) parts.push_back(absl::StrFormat("%g", e));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

// Every gpumemnet-*/manifest.json under models_dir, in the report's order: MLP, CNN,
// Transformer, each by kind.
absl::StatusOr<std::vector<GpuMemNetManifest>> LoadManifests(
    const std::string& models_dir) {
  std::vector<GpuMemNetManifest> manifests;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(models_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::filesystem::path file = entry.path() / "manifest.json";
    if (name.rfind("gpumemnet-", 0) != 0 || !std::filesystem::exists(file)) continue;
    absl::StatusOr<GpuMemNetManifest> manifest = GpuMemNetManifest::Load(file.string());
    if (!manifest.ok()) return manifest.status();
    manifests.push_back(std::move(*manifest));
  }
  if (ec) return absl::NotFoundError(absl::StrCat("cannot list ", models_dir));
  if (manifests.empty()) {
    return absl::NotFoundError(absl::StrCat("no gpumemnet-* manifests in ", models_dir));
  }
  const std::map<v1::ModelFamily, int> order = {{v1::MODEL_FAMILY_MLP, 0},
                                                {v1::MODEL_FAMILY_CNN, 1},
                                                {v1::MODEL_FAMILY_TRANSFORMER, 2}};
  for (const GpuMemNetManifest& m : manifests) {
    if (!order.count(m.family)) {
      return absl::InvalidArgumentError(
          absl::StrCat(m.id, ": no report section for the family '",
                       common::FamilyName(m.family), "'"));
    }
  }
  std::sort(manifests.begin(), manifests.end(),
            [&](const GpuMemNetManifest& a, const GpuMemNetManifest& b) {
              return std::make_pair(order.at(a.family), a.kind) <
                     std::make_pair(order.at(b.family), b.kind);
            });
  return manifests;
}

// The title, how the report was made and how to read its figures.
void WriteIntro(const std::string& models_dir, const std::string& command_line,
                const std::vector<GpuMemNetManifest>& manifests, std::ostream& md) {
  md << "# GPUMemNet / GPUUtilNet accuracy\n\n"
     << "Written by `gpuest-train` from the manifests in `" << models_dir
     << "/` (do not edit by hand; `deploy/train.sh` retrains everything and rewrites "
        "it).\n"
     << "Command: `" << command_line << "`\n\n"
     << "Every figure is on a held-out 30 % test split that no model or choice saw "
        "(stratified on the coarsest memory class, the > 40 GiB class included), or "
        "the mean ± standard deviation over stratified 3-fold cross-validation on the "
        "70 % training part. Each estimator is an ensemble (mean of the members' "
        "softmax probabilities); one multi-head network per member answers every bin "
        "width and utilization metric at once (summed cross-entropy), so a family has "
        "2 estimators x 5 networks instead of one network per target. Memory bins are "
        "GiB (1 GiB = 1024 MiB) over [0, 40 GiB) plus one top class \"> 40 GiB (did "
        "not fit the A100 40GB)\" for OOM_CRASH runs. The paper's figures use bins of "
        "1000 MiB multiples (its code bins at 8000 MiB, not 8192), so they compare "
        "closely but not exactly. 95 % intervals are Wilson intervals on the test "
        "accuracy.\n\n";
  bool smoke = false;
  for (const GpuMemNetManifest& m : manifests) smoke = smoke || m.training.smoke;
  if (smoke) {
    md << "**SMOKE RUN: a few hundred rows for two epochs. These numbers prove the "
          "pipeline and say nothing about the shipped models.**\n\n";
  }
}

void WriteMemorySection(const std::vector<GpuMemNetManifest>& manifests,
                        std::ostream& md) {
  md << "## Memory (held-out test split)\n\n"
     << "| dataset | estimator | bin width | test accuracy (95 % CI) | test macro-F1 | "
        "CV "
        "accuracy | CV macro-F1 | served | paper accuracy |\n"
     << "|---|---|---|---|---|---|---|---|---|\n";
  for (const GpuMemNetManifest& m : manifests) {
    for (const gpumemnet::HeadSpec& h : m.heads) {
      if (!h.memory()) continue;
      const gpumemnet::TestScores& test = m.training.test.at(h.name);
      const gpumemnet::CrossValidationScores& cv =
          m.training.cross_validation.heads.at(h.name);
      const auto ci = Wilson95(test.accuracy, test.n);
      const int width = static_cast<int>(h.width_bytes / common::kGiB);
      md << "| " << Dataset(m.family) << " | " << Estimator(m) << " | " << width
         << " GiB | " << F3(test.accuracy) << " (" << F3(ci.first) << "-" << F3(ci.second)
         << ") | " << F3(test.macro_f1) << " | " << F3(cv.accuracy_mean) << " ± "
         << F3(cv.accuracy_std) << " | " << F3(cv.macro_f1_mean) << " ± "
         << F3(cv.macro_f1_std) << " | " << (m.memory.served_head == h.name ? "yes" : "")
         << " | " << PaperMemory(m.family, m.kind, width) << " |\n";
    }
  }
  md << "\nThe served width of each estimator is chosen on cross-validation only: "
     << manifests[0].memory.rule << ".\n\n";
}

void WriteUtilizationSection(const std::vector<GpuMemNetManifest>& manifests,
                             std::ostream& md) {
  md << "## Utilization (GPUUtilNet, held-out test split)\n\n"
     << "Three classes per metric. The Transformer sample has no utilization columns, so "
        "the Transformer estimators answer memory only. DRAMA is not in the data. CNN "
        "rows whose DCGM columns are -1 (not measured) and OOM_CRASH rows have no "
        "utilization target; they still train the memory heads.\n\n"
     << "| dataset | estimator | metric | class edges (source) | test rows | test "
        "accuracy "
        "(95 % CI) | test macro-F1 | CV accuracy | CV macro-F1 | paper accuracy |\n"
     << "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const GpuMemNetManifest& m : manifests) {
    for (const gpumemnet::HeadSpec& h : m.heads) {
      if (h.target != gpumemnet::HeadTarget::kUtilization) continue;
      const gpumemnet::TestScores& test = m.training.test.at(h.name);
      const gpumemnet::CrossValidationScores& cv =
          m.training.cross_validation.heads.at(h.name);
      const auto ci = Wilson95(test.accuracy, test.n);
      const std::string source =
          h.edges_source.rfind("paper", 0) == 0 ? "paper" : "train tertiles";
      md << "| " << Dataset(m.family) << " | " << Estimator(m) << " | " << h.metric
         << " | " << Edges(h) << " (" << source << ") | " << test.n << " | "
         << F3(test.accuracy) << " (" << F3(ci.first) << "-" << F3(ci.second) << ") | "
         << F3(test.macro_f1) << " | " << F3(cv.accuracy_mean) << " ± "
         << F3(cv.accuracy_std) << " | " << F3(cv.macro_f1_mean) << " ± "
         << F3(cv.macro_f1_std) << " | " << PaperUtilization(m.family, h.metric)
         << " |\n";
    }
  }
  md << "\nEdges marked \"paper\" are the paper's appendix bins (MLP SMACT [0, 0.2, 0.7, "
        "1], CNN SMACT [0, 0.3, 0.9, 1]); the paper's bins for the other metrics were "
        "not "
        "found, so those use the tertiles of the training split (recorded in each "
        "manifest).\n\n";
}

// The split, seeds, rows and training time of each estimator.
void WriteDataSection(const std::vector<GpuMemNetManifest>& manifests, std::ostream& md) {
  md << "## Data, split and seeds\n\n"
     << "| estimator | rows read | used | OOM_CRASH (top class) | train / test | split "
        "seed | CV folds (seed) | members (seeds) | epochs | training time |\n"
     << "|---|---|---|---|---|---|---|---|---|---|\n";
  double total_seconds = 0;
  for (const GpuMemNetManifest& m : manifests) {
    const gpumemnet::TrainingRecord& t = m.training;
    std::vector<std::string> seeds;
    for (const gpumemnet::MemberRecord& member : m.members) {
      seeds.push_back(absl::StrCat(member.seed));
    }
    total_seconds += t.seconds;
    md << "| " << m.id << " | " << t.rows.read << " | " << t.rows.used << " | "
       << t.rows.oom_crash << " | " << t.split.train_rows << " / " << t.split.test_rows
       << " | " << t.split.seed << " | " << t.cross_validation.folds << " ("
       << t.cross_validation.seed << ") | " << m.members.size() << " ("
       << absl::StrJoin(seeds, ", ") << ") | "
       << (m.members.empty() ? 0 : m.members[0].epochs) << " | "
       << absl::StrFormat("%.0f s", t.seconds) << " |\n";
  }
  md << "\nTraining time in all (CV and final ensembles, one CPU thread): "
     << absl::StrFormat("%.1f min", total_seconds / 60) << ".\n\n";
}

// The rows each dataset dropped before the split, and its digests.
void WriteDroppedRows(const std::vector<GpuMemNetManifest>& manifests, std::ostream& md) {
  md << "Dropped rows (per dataset, before the split):\n\n";
  std::map<v1::ModelFamily, bool> seen;
  for (const GpuMemNetManifest& m : manifests) {
    if (seen[m.family]) continue;
    seen[m.family] = true;
    md << "- " << Dataset(m.family) << ":";
    const std::vector<gpumemnet::DroppedRows>& dropped = m.training.rows.dropped;
    if (dropped.empty()) md << " none";
    for (size_t i = 0; i < dropped.size(); ++i) {
      md << (i ? ";" : "") << " " << dropped[i].rows << " rows, " << dropped[i].reason;
    }
    md << ". Datasets:";
    for (const core::manifest::DatasetDigest& d : m.datasets) {
      md << " `" << d.file << "` sha256 " << d.sha256.substr(0, 16) << "...";
    }
    md << "\n";
  }
}

void WriteTransformerUncertainty(const std::vector<GpuMemNetManifest>& manifests,
                                 std::ostream& md) {
  md << "\n## Uncertainty of the Transformer sample\n\n"
     << "The Transformer data is a 559-row contiguous sample (about 6 % of the paper's "
        "dataset): the test split holds about 168 rows, so a test accuracy carries a "
        "95 % interval some ±0.05-0.07 wide (the intervals above), and the wider bins' "
        "higher classes hold a handful of rows each. Read its figures as indicative.\n";
  for (const GpuMemNetManifest& m : manifests) {
    if (m.family != v1::MODEL_FAMILY_TRANSFORMER) continue;
    const std::string& served = m.memory.served_head;
    const gpumemnet::TestScores& test = m.training.test.at(served);
    const auto ci = Wilson95(test.accuracy, test.n);
    md << "- " << Estimator(m) << ", served " << served << ": " << F3(test.accuracy)
       << " on " << test.n << " test rows, 95 % interval " << F3(ci.first) << "-"
       << F3(ci.second) << ".\n";
  }
}

}  // namespace

absl::Status WriteReport(const std::string& models_dir, const std::string& path,
                         const std::string& command_line) {
  GPUEST_ASSIGN_OR_RETURN(const std::vector<GpuMemNetManifest> manifests,
                          LoadManifests(models_dir));
  std::ostringstream md;
  WriteIntro(models_dir, command_line, manifests, md);
  WriteMemorySection(manifests, md);
  WriteUtilizationSection(manifests, md);
  WriteDataSection(manifests, md);
  WriteDroppedRows(manifests, md);
  WriteTransformerUncertainty(manifests, md);
  // The allocator simulation's section, written by gpuest-calibrate-memory, stays.
  return WriteReportFile(path, md.str(), ReportTail(path));
}

}  // namespace gpuest::trainer
