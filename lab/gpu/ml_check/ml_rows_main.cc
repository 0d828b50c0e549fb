// gpuest-ml-rows: the rows gpuest-ml-check feeds the ensembles, made by the project
// itself. For each served GPUMemNet ensemble: the rows of its family's CSV in GPUMemNet's
// format (mlp.csv, cnn.csv under --data-dir: the measured ones, or the tests' fixtures)
// through the one feature function and the manifest's encoding, or, where the family has
// no CSV rows here (the Transformer sample needs the exporter's JSON lines), the check's
// own generated rows; and for each row the probabilities of the served CPU path, the
// plain forward, with the served estimator's arithmetic (softmax per head in double, the
// mean over members). gpuest-ml-check --rows FILE compares libtorch on the CPU and on a
// GPU to those.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "common/model_family.h"
#include "common/text_file.h"
#include "estimators/gpumemnet/feature_encoding.h"
#include "estimators/gpumemnet/gpumemnet_manifest.h"
#include "estimators/gpumemnet/networks.h"
#include "estimators/gpumemnet/plain_export.h"
#include "estimators/gpumemnet/plain_forward.h"
#include "lab/data/dataset.h"
#include "lab/gpu/ml_check/ml_rows.h"

ABSL_FLAG(std::string, models, "models", "the model repository");
ABSL_FLAG(std::string, data_dir, "",
          "GPUMemNet's CSVs (mlp.csv, cnn.csv); empty: every ensemble gets generated "
          "rows");
ABSL_FLAG(int, rows, 1000, "rows per ensemble");
ABSL_FLAG(std::string, out, "", "the rows file to write");

namespace gpuest::ml_check {
namespace {

using gpumemnet::GpuMemNetManifest;

int Fail(const std::string& why) {
  std::fprintf(stderr, "gpuest-ml-rows: %s\n", why.c_str());
  return 1;
}

// n rows spread over the dataset's examples (every k-th), or all when fewer.
absl::StatusOr<std::vector<Row>> MeasuredRows(const GpuMemNetManifest& m,
                                              const std::string& csv, int n) {
  absl::StatusOr<data::Dataset> data = data::LoadCsvDataset(csv, m.family);
  if (!data.ok()) return data.status();
  std::vector<Row> rows;
  const size_t count = data->examples.size();
  for (size_t i = 0; i < count && rows.size() < static_cast<size_t>(n); ++i) {
    const size_t at = i * count / std::min<size_t>(count, n);
    if (at >= count) break;
    const data::Example& x = data->examples[at];
    Row r;
    r.global = gpumemnet::EncodeGlobal(m.encoding, x.features);
    if (m.kind == gpumemnet::NetworkKind::kTransformer) {
      const gpumemnet::EncodedSequence seq =
          gpumemnet::EncodeSequence(m.encoding, x.measured.model);
      if (seq.types.empty()) continue;  // The estimator does not apply without layers.
      r.types = seq.types;
      r.numbers = seq.numbers;
    }
    rows.push_back(std::move(r));
  }
  if (rows.empty()) return absl::NotFoundError(absl::StrCat(csv, ": no usable rows"));
  return rows;
}

GenerationSpec GenerationOf(const GpuMemNetManifest& m) {
  GenerationSpec g;
  for (const gpumemnet::FeatureSpec& f : m.encoding.features) {
    g.features.push_back({f.mean, f.std, f.min, f.max});
  }
  if (m.kind == gpumemnet::NetworkKind::kTransformer) {
    g.max_length = m.encoding.sequence.max_length;
    g.vocabulary = m.members.front().network.vocabulary;
  }
  return g;
}

// The served CPU path's mean probabilities for each row.
absl::Status AddReference(const GpuMemNetManifest& m, const std::string& directory,
                          std::vector<Row>& rows) {
  std::vector<gpumemnet::PlainNet> members;
  for (const gpumemnet::MemberRecord& member : m.members) {
    gpumemnet::GpuMemNet net(member.network);
    torch::load(net, absl::StrCat(directory, "/", member.file));
    net->eval();
    absl::StatusOr<gpumemnet::PlainNet> plain = gpumemnet::ExportPlainNet(net);
    if (!plain.ok()) return plain.status();
    members.push_back(std::move(*plain));
  }
  for (Row& r : rows) {
    gpumemnet::EncodedSequence seq;
    seq.types = r.types;
    seq.numbers = r.numbers;
    const gpumemnet::TokenSet tokens = gpumemnet::DistinctTokens(seq);
    int total = 0;
    for (const gpumemnet::HeadSpec& h : m.heads) total += h.classes();
    r.reference.assign(total, 0.0);
    for (const gpumemnet::PlainNet& net : members) {
      const std::vector<float> z = gpumemnet::PlainForward(net, r.global, tokens);
      int offset = 0;
      for (const gpumemnet::HeadSpec& h : m.heads) {
        const int end = offset + h.classes();
        const float top = *std::max_element(z.begin() + offset, z.begin() + end);
        std::vector<double> p(h.classes());
        double sum = 0;
        for (int k = offset; k < end; ++k) {
          sum += p[k - offset] = std::exp(double{z[k]} - top);
        }
        for (int k = offset; k < end; ++k) {
          r.reference[k] += p[k - offset] / sum / static_cast<double>(members.size());
        }
        offset = end;
      }
    }
  }
  return absl::OkStatus();
}

int Run() {
  const std::string models = absl::GetFlag(FLAGS_models);
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  const std::string out = absl::GetFlag(FLAGS_out);
  const int n = absl::GetFlag(FLAGS_rows);
  if (out.empty()) return Fail("--out is required");
  if (n < 64) return Fail("--rows: at least 64 (the check's batch)");
  std::vector<std::filesystem::path> directories;
  for (const auto& entry : std::filesystem::directory_iterator(models)) {
    if (std::filesystem::exists(entry.path() / "manifest.json")) {
      directories.push_back(entry.path());
    }
  }
  std::sort(directories.begin(), directories.end());
  std::map<std::string, RowSet> sets;
  for (const std::filesystem::path& directory : directories) {
    const std::string path = (directory / "manifest.json").string();
    absl::StatusOr<std::string> text =
        common::ReadTextFile(path, common::kMaxDatasetFileBytes);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    if (text->find("\"estimator_type\": \"gpumemnet\"") == std::string::npos) continue;
    absl::StatusOr<GpuMemNetManifest> m = GpuMemNetManifest::Parse(*text, path);
    if (!m.ok()) return Fail(std::string(m.status().message()));
    RowSet& set = sets[m->id];
    const std::string family = common::FamilyName(m->family);
    const std::string csv = absl::StrCat(data_dir, "/", family, ".csv");
    if (!data_dir.empty() && std::filesystem::exists(csv)) {
      absl::StatusOr<std::vector<Row>> rows = MeasuredRows(*m, csv, n);
      if (!rows.ok()) return Fail(std::string(rows.status().message()));
      set.rows = std::move(*rows);
      set.source =
          absl::StrCat("the rows of ", csv, " (evenly spread), encoded by the project");
    } else {
      set.rows = GenerateRows(GenerationOf(*m), SeedOf(m->id), n);
      set.source =
          "generated from the manifest's training ranges (seed: FNV-1a of the id)";
    }
    try {
      absl::Status s = AddReference(*m, directory.string(), set.rows);
      if (!s.ok()) return Fail(absl::StrCat(m->id, ": ", s.message()));
    } catch (const std::exception& ex) {
      return Fail(absl::StrCat(m->id, ": ", ex.what()));
    }
    std::printf("%s: %zu rows, %s\n", m->id.c_str(), set.rows.size(), set.source.c_str());
  }
  if (sets.empty()) return Fail("no GPUMemNet ensemble under " + models);
  std::ofstream file(out);
  WriteRows(file, sets);
  file.close();
  if (!file) return Fail("cannot write " + out);
  return 0;
}

}  // namespace
}  // namespace gpuest::ml_check

int main(int argc, char** argv) {
  gpuest::common::ParseFlags(
      argc, argv,
      {"gpuest-ml-rows --out FILE [flags]",
       "Writes the rows gpuest-ml-check --rows feeds the served GPUMemNet ensembles: "
       "GPUMemNet's measured rows encoded by the project (generated rows where a "
       "family has none), each with the served CPU path's probabilities.",
       "", __FILE__});
  return gpuest::ml_check::Run();
}
