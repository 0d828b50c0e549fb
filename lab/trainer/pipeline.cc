#include "lab/trainer/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/model_family.h"
#include "common/quantile.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/text_file.h"
#include "common/units.h"
#include "estimators/gpumemnet/feature_encoding.h"
#include "estimators/gpumemnet/gpumemnet_manifest.h"
#include "estimators/gpumemnet/network_config.h"
#include "estimators/gpumemnet/targets.h"
#include "lab/trainer/classification_scores.h"
#include "lab/trainer/split.h"
#include "lab/trainer/train.h"

namespace gpuest::trainer {
namespace {

using gpumemnet::HeadSpec;

constexpr int kMaxSequenceLength = 256;
constexpr double kServedAccuracy = 0.9;
constexpr char kServedRule[] =
    "the finest bin width whose cross-validation accuracy is at least 0.9, else the "
    "width with the best cross-validation accuracy";

std::vector<int> MemoryWidths(v1::ModelFamily family) {
  if (family == v1::MODEL_FAMILY_MLP) return {1, 2};
  return {2, 4, 8};
}

// The paper's appendix bins where we found them; otherwise none (tertiles).
std::vector<double> PaperEdges(v1::ModelFamily family, const std::string& metric) {
  if (metric != "SMACT") return {};
  if (family == v1::MODEL_FAMILY_MLP) return {0, 0.2, 0.7, 1};
  if (family == v1::MODEL_FAMILY_CNN) return {0, 0.3, 0.9, 1};
  return {};
}

double Round4(double x) { return std::round(x * 1e4) / 1e4; }

// Member hyperparameters: varied widths, dropout, learning rate, and seeds.
std::vector<MemberSpec> MemberSpecs(gpumemnet::NetworkKind kind, int members,
                                    int epochs) {
  std::vector<MemberSpec> specs;
  for (int i = 0; i < members; ++i) {
    MemberSpec s;
    s.network.kind = kind;
    s.epochs = epochs;
    if (kind == gpumemnet::NetworkKind::kMlp) {
      static const std::vector<std::vector<int>> kHidden = {
          {128, 128}, {256, 128}, {192, 192, 96}, {96, 96}, {256, 256}};
      static const double kDropout[] = {0.1, 0.2, 0.1, 0.05, 0.3};
      static const double kRate[] = {2e-3, 1e-3, 1e-3, 3e-3, 7e-4};
      s.network.hidden = kHidden[i % 5];
      s.network.dropout = kDropout[i % 5];
      s.learning_rate = kRate[i % 5];
    } else {
      // Small: one CPU thread trains them (see BM_GpuMemNet for serving cost).
      static const int kModel[] = {16, 24, 16, 32, 16};
      static const int kLayers[] = {2, 1, 1, 1, 2};
      static const int kFeedforward[] = {32, 48, 64, 64, 32};
      static const std::vector<std::vector<int>> kHidden = {
          {128}, {128, 64}, {128}, {96}, {128}};
      static const double kDropout[] = {0.1, 0.1, 0.15, 0.05, 0.1};
      static const double kRate[] = {1e-3, 2e-3, 1e-3, 1.5e-3, 2e-3};
      s.network.d_model = kModel[i % 5];
      s.network.attention_heads = 4;
      s.network.encoder_layers = kLayers[i % 5];
      s.network.feedforward = kFeedforward[i % 5];
      s.network.hidden = kHidden[i % 5];
      s.network.dropout = kDropout[i % 5];
      s.learning_rate = kRate[i % 5];
    }
    specs.push_back(s);
  }
  return specs;
}

struct Encoded {
  gpumemnet::EncodingSpec spec;
  EncodedSet set;
};

gpumemnet::EncodingSpec Fit(const data::Dataset& data, const std::vector<int>& rows,
                            bool sequence) {
  int longest = 1;
  std::vector<v1::FeatureVector> features;
  std::vector<const v1::ModelDescription*> models;
  for (int r : rows) {
    features.push_back(data.examples[r].features);
    models.push_back(&data.examples[r].measured.model);
    longest = std::max(longest, data.examples[r].measured.model.layers_size());
  }
  return gpumemnet::FitEncoding(
      gpumemnet::EncodingLayout(data.family,
                                sequence ? std::min(longest, kMaxSequenceLength) : 0),
      features, models);
}

EncodedSet Encode(const data::Dataset& data, const gpumemnet::EncodingSpec& spec,
                  const std::vector<std::vector<int64_t>>& labels,
                  const std::vector<int>& rows) {
  EncodedSet set;
  set.global_dim = static_cast<int>(spec.features.size());
  for (int r : rows) {
    const data::Example& e = data.examples[r];
    const std::vector<float> g = gpumemnet::EncodeGlobal(spec, e.features);
    set.global.insert(set.global.end(), g.begin(), g.end());
    if (spec.sequence.max_length > 0) {
      gpumemnet::EncodedSequence seq = gpumemnet::EncodeSequence(spec, e.measured.model);
      set.types.push_back(std::move(seq.types));
      set.numbers.push_back(std::move(seq.numbers));
    }
    set.labels.push_back(labels[r]);
  }
  return set;
}

struct EnsembleResult {
  std::vector<TrainedMember> members;
  std::vector<MemberSpec> specs;
  // Per head: ensemble scores on the evaluated rows.
  std::vector<Scores> scores;
  std::vector<double> member_accuracy;  // Each member alone, on the coarsest memory head.
};

std::vector<int> ArgmaxPerHead(const std::vector<float>& p,
                               const std::vector<int>& heads) {
  std::vector<int> out;
  int offset = 0;
  for (int classes : heads) {
    out.push_back(static_cast<int>(
        std::max_element(p.begin() + offset, p.begin() + offset + classes) - p.begin() -
        offset));
    offset += classes;
  }
  return out;
}

// The memory head of the widest bins: the one each member is scored on alone.
int CoarsestMemoryHead(const std::vector<HeadSpec>& heads) {
  int coarsest = 0;
  for (size_t h = 0; h < heads.size(); ++h) {
    if (heads[h].memory() && heads[h].width_bytes > heads[coarsest].width_bytes) {
      coarsest = static_cast<int>(h);
    }
  }
  return coarsest;
}

// Per head, the ensemble's scores on eval: the argmax of its members' mean
// probabilities.
std::vector<Scores> EnsembleScores(const EncodedSet& eval,
                                   const std::vector<std::vector<float>>& mean,
                                   const std::vector<int>& head_classes) {
  std::vector<Scores> scores;
  for (size_t h = 0; h < head_classes.size(); ++h) {
    std::vector<int> truth, predicted;
    for (int i = 0; i < eval.size(); ++i) {
      truth.push_back(static_cast<int>(eval.labels[i][h]));
      predicted.push_back(ArgmaxPerHead(mean[i], head_classes)[h]);
    }
    scores.push_back(Score(truth, predicted));
  }
  return scores;
}

absl::StatusOr<EnsembleResult> TrainAndEvaluate(
    const data::Dataset& data, const std::vector<HeadSpec>& heads,
    const std::vector<std::vector<int64_t>>& labels, const std::vector<int>& train_rows,
    const std::vector<int>& eval_rows, gpumemnet::NetworkKind kind,
    const PipelineOptions& options, int epochs, uint64_t seed_base,
    const std::string& label, gpumemnet::EncodingSpec* spec_out) {
  const bool sequence = kind == gpumemnet::NetworkKind::kTransformer;
  const gpumemnet::EncodingSpec spec = Fit(data, train_rows, sequence);
  if (spec_out) *spec_out = spec;
  const EncodedSet train = Encode(data, spec, labels, train_rows);
  const EncodedSet eval = Encode(data, spec, labels, eval_rows);
  std::vector<int> head_classes;
  for (const HeadSpec& h : heads) head_classes.push_back(h.classes());

  EnsembleResult result;
  result.specs = MemberSpecs(kind, options.members, epochs);
  std::vector<std::vector<float>> mean(eval.size());
  const int coarsest = CoarsestMemoryHead(heads);
  for (size_t m = 0; m < result.specs.size(); ++m) {
    MemberSpec& s = result.specs[m];
    s.seed = seed_base + 17 * m;
    s.network.global_features = train.global_dim;
    s.network.head_classes = head_classes;
    s.network.vocabulary = static_cast<int>(spec.sequence.vocabulary.size());
    const absl::Time start = absl::Now();
    auto progress = [&](int epoch, double loss) {
      if ((epoch + 1) % 10 == 0 || epoch + 1 == s.epochs) {
        std::fprintf(stderr, "[%s member %zu/%zu] epoch %d/%d loss %.4f (%.0f s)\n",
                     label.c_str(), m + 1, result.specs.size(), epoch + 1, s.epochs, loss,
                     absl::ToDoubleSeconds(absl::Now() - start));
      }
    };
    GPUEST_ASSIGN_OR_RETURN(TrainedMember member, TrainMember(train, s, progress));
    GPUEST_ASSIGN_OR_RETURN(auto probabilities, Predict(member, eval));
    std::vector<int> truth, predicted;
    for (int i = 0; i < eval.size(); ++i) {
      if (mean[i].empty()) mean[i].assign(probabilities[i].size(), 0.f);
      for (size_t k = 0; k < probabilities[i].size(); ++k) {
        mean[i][k] += probabilities[i][k] / static_cast<float>(result.specs.size());
      }
      truth.push_back(static_cast<int>(eval.labels[i][coarsest]));
      predicted.push_back(ArgmaxPerHead(probabilities[i], head_classes)[coarsest]);
    }
    result.member_accuracy.push_back(Score(truth, predicted).accuracy);
    result.members.push_back(std::move(member));
  }
  result.scores = EnsembleScores(eval, mean, head_classes);
  return result;
}

std::string FamilyTitle(v1::ModelFamily f) {
  switch (f) {
    case v1::MODEL_FAMILY_MLP:
      return "MLP";
    case v1::MODEL_FAMILY_CNN:
      return "CNN";
    default:
      return "Transformer";
  }
}

// Each example's class at the coarsest memory width: the split's strata.
std::vector<int> MemoryStrata(const data::Dataset& data) {
  const HeadSpec coarse = gpumemnet::MemoryHead(MemoryWidths(data.family).back());
  std::vector<int> strata(data.examples.size());
  for (size_t i = 0; i < strata.size(); ++i) {
    strata[i] = coarse.MemoryClass(data.examples[i].memory_bytes(),
                                   data.examples[i].measured.oom);
  }
  return strata;
}

// A smoke run trains on smoke_rows examples drawn with the seed; dropped counts the
// rest.
data::Dataset SmokeSample(const data::Dataset& data_in, const PipelineOptions& options,
                          int64_t& dropped) {
  data::Dataset data = data_in;
  dropped = 0;
  if (options.smoke && static_cast<int>(data.examples.size()) > options.smoke_rows) {
    std::vector<int> order(data.examples.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    Shuffle(order, options.seed);
    order.resize(options.smoke_rows);
    std::sort(order.begin(), order.end());
    std::vector<data::Example> kept;
    for (int i : order) kept.push_back(data.examples[i]);
    dropped = static_cast<int64_t>(data.examples.size() - kept.size());
    data.examples = std::move(kept);
  }
  return data;
}

// Utilization heads: the paper's edges where known, else the training split's
// tertiles; a metric with fewer than 3 training values gets none.
void AddUtilizationHeads(const data::Dataset& data, const Split& split,
                         std::vector<HeadSpec>& heads) {
  for (const std::string& metric : data.utilization_metrics) {
    std::vector<double> edges = PaperEdges(data.family, metric);
    std::string source = "paper appendix table (GPUUtilNet bins)";
    if (edges.empty()) {
      std::vector<double> values;
      for (int r : split.train) {
        auto it = data.examples[r].measured.utilization.find(metric);
        if (it != data.examples[r].measured.utilization.end())
          values.push_back(it->second);
      }
      if (values.size() < 3) continue;
      edges = {0, Round4(common::Quantile(values, 1.0 / 3)),
               Round4(common::Quantile(values, 2.0 / 3)), 1};
      source =
          "tertiles of the training split (the paper's bins for this metric were not "
          "found)";
    }
    heads.push_back(
        gpumemnet::UtilizationHead(metric, std::move(edges), std::move(source)));
  }
}

// Each example's class per head; -100 (ignored by the loss) where it has no figure.
std::vector<std::vector<int64_t>> LabelsOf(const data::Dataset& data,
                                           const std::vector<HeadSpec>& heads) {
  std::vector<std::vector<int64_t>> labels(data.examples.size());
  for (size_t i = 0; i < data.examples.size(); ++i) {
    const data::Example& e = data.examples[i];
    for (const HeadSpec& h : heads) {
      int c = -1;
      if (h.memory()) {
        c = h.MemoryClass(e.memory_bytes(), e.measured.oom);
      } else if (auto it = e.measured.utilization.find(h.metric);
                 it != e.measured.utilization.end()) {
        c = h.UtilizationClass(it->second);
      }
      labels[i].push_back(c < 0 ? -100 : c);
    }
  }
  return labels;
}

// The served memory head, chosen by cross-validation only: the finest width whose
// cross-validation accuracy is at least kServedAccuracy, else the most accurate.
int ServedMemoryHead(const std::vector<HeadSpec>& heads,
                     const std::vector<std::vector<double>>& cv_acc) {
  int served = -1, best = -1;
  for (size_t h = 0; h < heads.size(); ++h) {
    if (!heads[h].memory()) continue;
    const double acc = Mean(cv_acc[h]);
    if (best < 0 || acc > Mean(cv_acc[best])) best = static_cast<int>(h);
    if (acc >= kServedAccuracy &&
        (served < 0 || heads[h].width_bytes < heads[served].width_bytes)) {
      served = static_cast<int>(h);
    }
  }
  return served < 0 ? best : served;
}

// Writes each member's weights into dir and records it in manifest (file, SHA-256, how
// it was trained); weights_digest: the members' SHA-256s, in order.
absl::Status SaveMembers(const EnsembleResult& final, const std::string& dir,
                         gpumemnet::GpuMemNetManifest& manifest,
                         std::string& weights_digest) {
  for (size_t m = 0; m < final.members.size(); ++m) {
    gpumemnet::MemberRecord& record = manifest.members.emplace_back();
    record.file = absl::StrCat("member-", m, ".pt");
    const std::string path = absl::StrCat(dir, "/", record.file);
    GPUEST_RETURN_IF_ERROR(SaveMember(final.members[m], path));
    GPUEST_ASSIGN_OR_RETURN(record.sha256, common::Sha256OfFile(path));
    weights_digest += record.sha256;
    const MemberSpec& s = final.specs[m];
    record.seed = s.seed;
    record.learning_rate = s.learning_rate;
    record.weight_decay = s.weight_decay;
    record.epochs = s.epochs;
    record.batch_size = s.batch_size;
    record.optimizer = "Adam, cosine learning-rate decay";
    record.network = s.network;
    record.test_accuracy_coarsest_memory = final.member_accuracy[m];
  }
  return absl::OkStatus();
}

// How the ensemble was trained and scored: the split, the cross-validation per head
// (accuracy and macro F1 per fold), the held-out scores, the rows read, used and
// dropped.
gpumemnet::TrainingRecord TrainingRecordOf(
    const data::Dataset& data, const PipelineOptions& options, const Split& split,
    const std::vector<HeadSpec>& heads, const std::vector<std::vector<double>>& cv_acc,
    const std::vector<std::vector<double>>& cv_f1, const EnsembleResult& final,
    int64_t smoke_dropped) {
  gpumemnet::TrainingRecord training;
  training.smoke = options.smoke;
  training.split.test_fraction = options.test_fraction;
  training.split.seed = options.seed;
  training.split.stratified_on =
      absl::StrCat(gpumemnet::MemoryHead(MemoryWidths(data.family).back()).name,
                   " class (incl. the > 40 GiB class)");
  training.split.train_rows = static_cast<int64_t>(split.train.size());
  training.split.test_rows = static_cast<int64_t>(split.test.size());
  training.cross_validation.folds = options.folds;
  training.cross_validation.seed = options.seed + 1;
  training.cross_validation.on = "the training split only";
  for (size_t h = 0; h < heads.size(); ++h) {
    training.cross_validation.heads[heads[h].name] = {
        Mean(cv_acc[h]), StdDev(cv_acc[h]), Mean(cv_f1[h]), StdDev(cv_f1[h]), cv_acc[h]};
    training.test[heads[h].name] = {final.scores[h].accuracy, final.scores[h].macro_f1,
                                    final.scores[h].n};
  }
  training.rows.read = data.rows;
  training.rows.used = static_cast<int64_t>(data.examples.size());
  for (const data::Example& e : data.examples) training.rows.oom_crash += e.measured.oom;
  for (const auto& [reason, rows] : data.dropped) {
    training.rows.dropped.push_back({reason, rows});
  }
  if (smoke_dropped > 0) {
    training.rows.dropped.push_back({"smoke run: not in the sample", smoke_dropped});
  }
  return training;
}

// What every kind of one family's ensembles is trained and scored on.
struct FamilyPlan {
  const data::Dataset& data;
  std::string family;           // "mlp"
  std::vector<HeadSpec> heads;  // Memory heads, then utilization heads.
  Split split;
  std::vector<std::vector<int64_t>> labels;  // Per example, per head.
  std::vector<std::vector<int>> folds;       // Of the training part.
  int64_t smoke_dropped = 0;
};

FamilyPlan PlanOf(const data::Dataset& data, const std::string& family,
                  const PipelineOptions& options, int64_t smoke_dropped) {
  FamilyPlan plan{data, family, {}, {}, {}, {}, smoke_dropped};
  // Memory heads, then the split on the coarsest memory class (incl. the top class).
  for (int w : MemoryWidths(data.family)) plan.heads.push_back(gpumemnet::MemoryHead(w));
  const std::vector<int> strata = MemoryStrata(data);
  plan.split = HeldOutSplit(data, options.test_fraction, options.seed);

  AddUtilizationHeads(data, plan.split, plan.heads);
  plan.labels = LabelsOf(data, plan.heads);
  plan.folds = StratifiedFolds(plan.split.train, strata, options.folds, options.seed + 1);
  return plan;
}

// One kind's ensemble of a family, as trained: what its manifest records.
struct KindResult {
  std::string id;  // "gpumemnet-mlp-mlp"
  gpumemnet::NetworkKind kind = gpumemnet::NetworkKind::kMlp;
  absl::Time start;  // Of its training.
  // Cross-validation: per head, each fold's scores.
  std::vector<std::vector<double>> cv_acc, cv_f1;
  EnsembleResult final;  // The shipped ensemble.
  gpumemnet::EncodingSpec spec;
  int served = 0;  // Its served memory head.
};

// Cross-validation on the training part: the ensemble as shipped, per fold.
absl::Status CrossValidate(const FamilyPlan& plan, const PipelineOptions& options,
                           int epochs, uint64_t kind_seed, KindResult& r) {
  r.cv_acc.assign(plan.heads.size(), {});
  r.cv_f1.assign(plan.heads.size(), {});
  for (int f = 0; f < options.folds; ++f) {
    std::vector<int> fold_train;
    for (int g = 0; g < options.folds; ++g) {
      if (g != f)
        fold_train.insert(fold_train.end(), plan.folds[g].begin(), plan.folds[g].end());
    }
    std::sort(fold_train.begin(), fold_train.end());
    GPUEST_ASSIGN_OR_RETURN(
        EnsembleResult fold,
        TrainAndEvaluate(plan.data, plan.heads, plan.labels, fold_train, plan.folds[f],
                         r.kind, options, epochs, kind_seed + 100 * (f + 1),
                         absl::StrCat(r.id, " cv fold ", f + 1, "/", options.folds),
                         nullptr));
    for (size_t h = 0; h < plan.heads.size(); ++h) {
      r.cv_acc[h].push_back(fold.scores[h].accuracy);
      r.cv_f1[h].push_back(fold.scores[h].macro_f1);
    }
  }
  return absl::OkStatus();
}

// The manifest's description of the ensemble, beside its members and training record.
void DescribeEnsemble(const FamilyPlan& plan, const PipelineOptions& options,
                      const KindResult& r, const std::string& weights_digest,
                      gpumemnet::GpuMemNetManifest& manifest) {
  const std::vector<HeadSpec>& heads = plan.heads;
  const std::string title = FamilyTitle(plan.data.family);
  const std::string kind_title =
      r.kind == gpumemnet::NetworkKind::kMlp ? "MLP" : "Transformer";
  manifest.id = r.id;
  manifest.version = common::Sha256Hex(weights_digest).substr(0, 12);
  manifest.kind = r.kind;
  manifest.family = plan.data.family;
  manifest.description = absl::StrCat(
      "GPUMemNet/GPUUtilNet ", kind_title, "-based ensemble of ", r.final.members.size(),
      " classifiers for ", title,
      " training jobs: peak memory in GiB bins, plus utilization classes where the "
      "data has them (A100 40GB measurements)",
      options.smoke ? "; SMOKE RUN, not a shipped model" : "");
  manifest.heads = heads;
  manifest.memory = {heads[r.served].name,
                     static_cast<int>(heads[r.served].width_bytes / common::kGiB),
                     kServedRule, "GiB = 1024 MiB; edges in bytes"};
  manifest.encoding = r.spec;
  manifest.ensemble =
      "mean of the members' softmax probabilities per head; class = argmax; "
      "confidence = mean over members of each member's probability for that class";
  for (const data::DatasetFile& f : plan.data.files) {
    manifest.datasets.push_back({f.name, f.sha256, f.role});
  }
  manifest.trainer_version = kTrainerVersion;
}

// models/<id>/: the members' weights and manifest.json, in place of what was there.
absl::Status WriteEnsemble(const FamilyPlan& plan, const PipelineOptions& options,
                           const KindResult& r) {
  const std::string dir = absl::StrCat(options.out_dir, "/", r.id);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  gpumemnet::GpuMemNetManifest manifest;
  std::string weights_digest;
  GPUEST_RETURN_IF_ERROR(SaveMembers(r.final, dir, manifest, weights_digest));
  gpumemnet::TrainingRecord& training = manifest.training;
  training = TrainingRecordOf(plan.data, options, plan.split, plan.heads, r.cv_acc,
                              r.cv_f1, r.final, plan.smoke_dropped);
  training.seconds = absl::ToDoubleSeconds(absl::Now() - r.start);
  DescribeEnsemble(plan, options, r, weights_digest, manifest);
  return common::WriteTextFile(absl::StrCat(dir, "/manifest.json"), manifest.Text());
}

// One kind's ensemble of the family: cross-validated, trained on the training part,
// scored on the test part and written.
absl::Status TrainKind(const FamilyPlan& plan, gpumemnet::NetworkKind kind,
                       const PipelineOptions& options) {
  KindResult r;
  r.start = absl::Now();
  r.kind = kind;
  r.id = absl::StrCat("gpumemnet-", plan.family, "-", gpumemnet::NetworkKindName(kind));
  const int epochs = options.smoke                          ? 2
                     : kind == gpumemnet::NetworkKind::kMlp ? options.mlp_epochs
                                                            : options.transformer_epochs;
  const uint64_t kind_seed =
      options.seed * 1000 + (kind == gpumemnet::NetworkKind::kMlp ? 0 : 500);
  GPUEST_RETURN_IF_ERROR(CrossValidate(plan, options, epochs, kind_seed, r));
  // The shipped ensemble: trained on the whole training part, scored on the test part.
  GPUEST_ASSIGN_OR_RETURN(
      r.final, TrainAndEvaluate(plan.data, plan.heads, plan.labels, plan.split.train,
                                plan.split.test, kind, options, epochs, kind_seed,
                                absl::StrCat(r.id, " final"), &r.spec));
  r.served = ServedMemoryHead(plan.heads, r.cv_acc);
  GPUEST_RETURN_IF_ERROR(WriteEnsemble(plan, options, r));
  std::fprintf(stderr, "%s: served %s, held-out accuracy %.3f (%.0f s)\n", r.id.c_str(),
               plan.heads[r.served].name.c_str(), r.final.scores[r.served].accuracy,
               absl::ToDoubleSeconds(absl::Now() - r.start));
  return absl::OkStatus();
}

}  // namespace

Split HeldOutSplit(const data::Dataset& data, double test_fraction, uint64_t seed) {
  std::vector<int> all(data.examples.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return StratifiedSplit(all, MemoryStrata(data), test_fraction, seed);
}

absl::Status TrainFamily(const data::Dataset& data_in, const PipelineOptions& options) {
  const absl::Time family_start = absl::Now();
  const std::string family = std::string(common::FamilyName(data_in.family));
  int64_t smoke_dropped = 0;
  const data::Dataset data = SmokeSample(data_in, options, smoke_dropped);
  const FamilyPlan plan = PlanOf(data, family, options, smoke_dropped);
  for (const gpumemnet::NetworkKind kind : options.kinds) {
    GPUEST_RETURN_IF_ERROR(TrainKind(plan, kind, options));
  }
  std::fprintf(stderr, "%s: done in %.0f s\n", family.c_str(),
               absl::ToDoubleSeconds(absl::Now() - family_start));
  return absl::OkStatus();
}

}  // namespace gpuest::trainer
