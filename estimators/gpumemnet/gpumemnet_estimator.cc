// The libtorch door of the served GPUMemNet estimators: c10::Error and std::exception
// stop here and become absl::Status.
#include "estimators/gpumemnet/gpumemnet_estimator.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/model_family.h"
#include "common/sha256.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "estimators/gpumemnet/feature_encoding.h"
#include "estimators/gpumemnet/gpumemnet_manifest.h"
#include "estimators/gpumemnet/network_config.h"
#include "estimators/gpumemnet/networks.h"
#include "estimators/gpumemnet/plain_export.h"
#include "estimators/gpumemnet/plain_forward.h"
#include "estimators/gpumemnet/targets.h"

namespace gpuest::gpumemnet {
namespace {

// The GPU the training data was measured on (models/gpu_profiles.json id).
constexpr char kTrainedGpu[] = "a100-40gb";
// Each kind of warning halves the confidence.
constexpr double kWarningPenalty = 0.5;

std::string GiBText(uint64_t bytes) {
  return absl::StrFormat("%g GiB", common::InGiB(bytes));
}

// One member's weights from the bytes the repository read, after checking them: the
// sha256 the manifest records (a damaged or swapped file is refused, not loaded), and
// finite logits on the probe input (weights that are NaN or overflow would put NaN in
// every answer and pick a wrong bin without a word). Errors name the file.
absl::StatusOr<GpuMemNet> LoadVerifiedMember(const core::ModelArtifact& artifact,
                                             const MemberRecord& member,
                                             const std::string& manifest_path) {
  const std::string path = absl::StrCat(artifact.directory, "/", member.file);
  const auto bytes = artifact.files.find(member.file);
  if (bytes == artifact.files.end()) {
    return absl::NotFoundError(absl::StrCat(path, ": missing; ", manifest_path,
                                            " lists it as a member's weights"));
  }
  const std::string digest = common::Sha256Hex(bytes->second);
  if (digest != member.sha256) {
    return absl::DataLossError(
        absl::StrCat(path, ": damaged or not the trained member: its sha256 is ", digest,
                     ", ", manifest_path, " records ", member.sha256));
  }
  try {
    GpuMemNet net(member.network);
    std::istringstream in(bytes->second);
    torch::load(net, in);
    net->eval();
    const std::vector<float> logits = ProbeLogits(net, MakeProbeInput(member.network));
    for (size_t k = 0; k < logits.size(); ++k) {
      if (!std::isfinite(logits[k])) {
        return absl::DataLossError(absl::StrCat(
            path, ": the weights give a non-finite output (logit ", k, " is ", logits[k],
            ") on the probe input; refusing to serve them"));
      }
    }
    return net;
  } catch (const c10::Error& ex) {
    return absl::DataLossError(
        absl::StrCat(path, ": libtorch: ", ex.what_without_backtrace()));
  } catch (const std::exception& ex) {
    return absl::DataLossError(absl::StrCat(path, ": ", ex.what()));
  }
}

class GpuMemNetEstimator final : public core::Estimator {
 public:
  static absl::StatusOr<std::unique_ptr<core::Estimator>> Load(
      const core::ModelArtifact& artifact, const std::string& device);

  const v1::EstimatorInfo& Info() const override { return info_; }
  std::string Device() const override { return device_.str(); }

  bool AppliesTo(const core::EstimationInput& input) const override {
    if (input.features.family() != spec_.family) return false;
    if (!transformer_) return true;
    return input.request.has_model() && input.request.model().layers_size() > 0;
  }

  absl::Status Estimate(const core::EstimationInput& input, v1::EstimatorResult& result,
                        std::vector<v1::Warning>& warnings) const override {
    try {
      return EstimateOrThrow(input, result, warnings);
    } catch (const c10::Error& e) {
      return absl::InternalError(
          absl::StrCat(info_.id(), ": libtorch: ", e.what_without_backtrace()));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(info_.id(), ": ", e.what()));
    }
  }

 private:
  GpuMemNetEstimator() = default;

  // probabilities[member][class over all heads], softmax per head.
  using Probabilities = std::vector<std::vector<double>>;

  // What the members read: the global features, the layer sequence (Transformer-based
  // members) and, for libtorch's forward, both as tensors over them.
  struct MemberInputs {
    std::vector<float> global;
    EncodedSequence seq;
    std::vector<torch::Tensor> args;
  };

  // Load's steps: the heads and the encoding, then the members (each checked against
  // them; total_classes, the heads' classes together), then the info.
  int TakeHeads(const GpuMemNetManifest& m);
  absl::Status LoadMembers(const GpuMemNetManifest& m,
                           const core::ModelArtifact& artifact, const std::string& where,
                           int total_classes);
  void FillInfo(const GpuMemNetManifest& m);

  // Encodes the request, runs every member on it and writes the result: the steps
  // below.
  absl::Status EstimateOrThrow(const core::EstimationInput& input,
                               v1::EstimatorResult& result,
                               std::vector<v1::Warning>& warnings) const;
  // The request encoded into in (in.args only for libtorch's forward, on the CPU),
  // with a warning where the layer sequence was cut to the training maximum.
  void EncodeInputs(const core::EstimationInput& input, MemberInputs& in,
                    std::vector<v1::Warning>& warnings) const;
  // The confidence's factor, halved for each kind of warning, whose words go into
  // caveats: out of the training distribution, another GPU than the trained one.
  double Penalty(const core::EstimationInput& input, bool in_distribution,
                 std::vector<v1::Warning>& warnings,
                 std::vector<std::string>& caveats) const;
  // Each member's class probabilities, the members' inputs being global (and tokens)
  // for the plain forward, args for libtorch's. Between members the deadline is
  // checked; a non-finite logit is an error, never a class.
  absl::StatusOr<Probabilities> MemberProbabilities(
      const std::vector<float>& global, const TokenSet& tokens,
      const std::vector<torch::Tensor>& args, const common::WorkDeadline& deadline) const;
  // Head h's ensemble class: the mean probability per class over the members (into
  // mean) and its best class; confidence, the mean of the members' probabilities for
  // that class times penalty.
  int EnsembleClass(const Probabilities& probabilities, size_t h, double penalty,
                    std::vector<double>& mean, double& confidence) const;
  // The served memory head's bins, point and upper bound; returns the predicted bin.
  int WriteMemory(const Probabilities& probabilities, double penalty,
                  v1::EstimatorResult& result) const;
  void WriteUtilization(const Probabilities& probabilities, double penalty,
                        v1::EstimatorResult& result) const;
  std::string Basis(bool above_the_card, const std::vector<std::string>& caveats) const;

  v1::EstimatorInfo info_;
  EncodingSpec spec_;
  std::vector<HeadSpec> heads_;
  std::vector<int> head_offsets_;  // Where each head's logits start.
  int served_head_ = -1;           // The memory head the result reports.
  bool transformer_ = false;
  torch::Device device_{torch::kCPU};
  std::vector<GpuMemNet> members_;
  // On the CPU: the members as plain arrays (empty on other devices).
  std::vector<PlainNet> plain_;
};

// A fault of the manifest at where (its path), or of what it lists.
absl::Status ManifestError(const std::string& where, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
}

absl::StatusOr<std::unique_ptr<core::Estimator>> GpuMemNetEstimator::Load(
    const core::ModelArtifact& artifact, const std::string& device) {
  const std::string where = absl::StrCat(artifact.directory, "/manifest.json");
  GPUEST_ASSIGN_OR_RETURN(const GpuMemNetManifest m,
                          GpuMemNetManifest::Parse(artifact.manifest_text, where));
  std::unique_ptr<GpuMemNetEstimator> e(new GpuMemNetEstimator());
  try {
    const int total_classes = e->TakeHeads(m);
    e->device_ = torch::Device(device);
    GPUEST_RETURN_IF_ERROR(e->LoadMembers(m, artifact, where, total_classes));
    e->FillInfo(m);
  } catch (const c10::Error& ex) {
    return ManifestError(where, absl::StrCat("libtorch: ", ex.what_without_backtrace()));
  } catch (const std::exception& ex) {
    return ManifestError(where, ex.what());
  }
  return std::unique_ptr<core::Estimator>(std::move(e));
}

int GpuMemNetEstimator::TakeHeads(const GpuMemNetManifest& m) {
  spec_ = m.encoding;
  transformer_ = m.kind == NetworkKind::kTransformer;

  int offset = 0;
  for (const HeadSpec& head : m.heads) {
    if (head.name == m.memory.served_head) {
      served_head_ = static_cast<int>(heads_.size());
    }
    head_offsets_.push_back(offset);
    offset += head.classes();
    heads_.push_back(head);
  }
  return offset;
}

absl::Status GpuMemNetEstimator::LoadMembers(const GpuMemNetManifest& m,
                                             const core::ModelArtifact& artifact,
                                             const std::string& where,
                                             int total_classes) {
  for (const MemberRecord& member : m.members) {
    const NetworkConfig* config = &member.network;
    if (config->kind != m.kind || config->total_classes() != total_classes ||
        config->global_features != static_cast<int>(spec_.features.size()) ||
        (transformer_ &&
         config->vocabulary != static_cast<int>(spec_.sequence.vocabulary.size()))) {
      return ManifestError(
          where, "a member's network does not match the heads and the encoding");
    }
    GPUEST_ASSIGN_OR_RETURN(GpuMemNet net, LoadVerifiedMember(artifact, member, where));
    net->to(device_);
    members_.push_back(std::move(net));
  }
  if (members_.empty()) return ManifestError(where, "no members");
  if (device_.is_cpu()) {
    for (const GpuMemNet& net : members_) {
      auto plain = ExportPlainNet(net);
      if (!plain.ok()) return ManifestError(where, plain.status().message());
      plain_.push_back(std::move(*plain));
    }
  }
  return absl::OkStatus();
}

void GpuMemNetEstimator::FillInfo(const GpuMemNetManifest& m) {
  v1::EstimatorInfo& info = info_;
  info.set_id(m.id);
  info.set_kind(v1::ESTIMATOR_KIND_CLASSIFIER);
  info.set_family(spec_.family);
  info.set_version(m.version);
  info.set_description(m.description);
  info.set_estimates_memory(true);
  for (const HeadSpec& h : heads_) {
    if (h.target == HeadTarget::kUtilization) {
      info.add_utilization_metrics(UtilizationMetricOf(h.metric));
    }
  }
  auto& metrics = *info.mutable_training_metrics();
  for (const auto& [head, scores] : m.training.test) {
    metrics[absl::StrCat(head, "_accuracy")] = scores.accuracy;
    metrics[absl::StrCat(head, "_macro_f1")] = scores.macro_f1;
  }
  if (auto it = m.training.test.find(m.memory.served_head); it != m.training.test.end()) {
    metrics["memory_accuracy"] = it->second.accuracy;
  }
}

absl::Status GpuMemNetEstimator::EstimateOrThrow(
    const core::EstimationInput& input, v1::EstimatorResult& result,
    std::vector<v1::Warning>& warnings) const {
  c10::InferenceMode inference;
  const std::vector<std::string> ood = OutOfDistribution(spec_, input.features);
  for (const std::string& finding : ood) {
    warnings.push_back(
        core::MakeWarning(v1::WARNING_CODE_OUT_OF_DISTRIBUTION, finding, info_.id()));
  }
  MemberInputs in;
  EncodeInputs(input, in, warnings);
  result.set_in_distribution(ood.empty() && !in.seq.truncated);
  std::vector<std::string> caveats;
  const double penalty = Penalty(input, result.in_distribution(), warnings, caveats);
  if (!device_.is_cpu()) {
    for (torch::Tensor& t : in.args) t = t.to(device_);
  }
  // The members read the same tokens: made once for all of them.
  const bool plain = !plain_.empty();
  const TokenSet tokens = plain && transformer_ ? DistinctTokens(in.seq) : TokenSet{};
  GPUEST_ASSIGN_OR_RETURN(
      const Probabilities probabilities,
      MemberProbabilities(in.global, tokens, in.args, input.deadline));
  const int bin = WriteMemory(probabilities, penalty, result);
  WriteUtilization(probabilities, penalty, result);
  result.set_basis(Basis(bin == heads_[served_head_].classes() - 1, caveats));
  return absl::OkStatus();
}

void GpuMemNetEstimator::EncodeInputs(const core::EstimationInput& input,
                                      MemberInputs& in,
                                      std::vector<v1::Warning>& warnings) const {
  in.global = EncodeGlobal(spec_, input.features);
  const bool plain = !plain_.empty();
  if (!plain) {
    in.args.push_back(torch::from_blob(
        in.global.data(), {1, static_cast<int64_t>(in.global.size())}, torch::kFloat32));
  }
  if (!transformer_) return;
  in.seq = EncodeSequence(spec_, input.request.model());
  const int64_t n = static_cast<int64_t>(in.seq.types.size());
  if (in.seq.truncated) {
    warnings.push_back(core::MakeWarning(
        v1::WARNING_CODE_OUT_OF_DISTRIBUTION,
        absl::StrCat("the layer sequence has ", input.request.model().layers_size(),
                     " layers; only the first ", n, " were read (the training maximum)"),
        info_.id()));
  }
  if (!plain) {
    in.args.push_back(torch::from_blob(in.seq.types.data(), {1, n}, torch::kInt64));
    in.args.push_back(
        torch::from_blob(in.seq.numbers.data(), {1, n, 2}, torch::kFloat32));
    in.args.push_back(torch::zeros({1, n}, torch::kBool));
  }
}

double GpuMemNetEstimator::Penalty(const core::EstimationInput& input,
                                   bool in_distribution,
                                   std::vector<v1::Warning>& warnings,
                                   std::vector<std::string>& caveats) const {
  double penalty = 1.0;
  if (!in_distribution) {
    penalty *= kWarningPenalty;
    caveats.push_back("out of the training distribution");
  }
  if (!input.request.gpu().empty() && input.gpu.id != kTrainedGpu) {
    warnings.push_back(core::MakeWarning(
        v1::WARNING_CODE_GPU_EXTRAPOLATION,
        absl::StrCat("trained on A100 40GB measurements; ", input.gpu.id,
                     " may need a different amount of memory"),
        info_.id()));
    penalty *= kWarningPenalty;
    caveats.push_back("another GPU than the A100 40GB");
  }
  return penalty;
}

absl::StatusOr<GpuMemNetEstimator::Probabilities> GpuMemNetEstimator::MemberProbabilities(
    const std::vector<float>& global, const TokenSet& tokens,
    const std::vector<torch::Tensor>& args, const common::WorkDeadline& deadline) const {
  const bool plain = !plain_.empty();
  const size_t total =
      static_cast<size_t>(head_offsets_.back() + heads_.back().classes());
  Probabilities probabilities;
  probabilities.reserve(members_.size());
  for (size_t i = 0; i < members_.size(); ++i) {
    // A Transformer-based member takes a while on a long layer sequence: stop between
    // members once the call's deadline has passed.
    GPUEST_RETURN_IF_ERROR(deadline.Check());
    std::vector<float> dense_logits;
    torch::Tensor logits;
    const float* z = nullptr;
    if (plain) {
      dense_logits = PlainForward(plain_[i], global, tokens);
      z = dense_logits.data();
    } else {
      // Forward is thread-safe in eval mode; a holder copy shares the module.
      GpuMemNet member = members_[i];
      logits = transformer_ ? member->forward(args[0], args[1], args[2], args[3])
                            : member->forward(args[0]);
      logits = logits.to(torch::kCPU, torch::kFloat32).contiguous();
      z = logits.data_ptr<float>();
    }
    // The probe at load saw finite outputs; an input that still gives a non-finite
    // logit must not become a class (NaN compares false, and argmax would pick one).
    for (size_t k = 0; k < total; ++k) {
      if (!std::isfinite(z[k])) {
        return absl::InternalError(
            absl::StrCat("member ", i, " gave a non-finite output (logit ", k, " is ",
                         z[k], ") on this request; the ensemble does not answer"));
      }
    }
    std::vector<double>& p = probabilities.emplace_back(total);
    for (size_t h = 0; h < heads_.size(); ++h) {
      const int begin = head_offsets_[h], end = begin + heads_[h].classes();
      const float top = *std::max_element(z + begin, z + end);
      double sum = 0;
      for (int k = begin; k < end; ++k) sum += p[k] = std::exp(double{z[k]} - top);
      for (int k = begin; k < end; ++k) p[k] /= sum;
    }
  }
  return probabilities;
}

int GpuMemNetEstimator::EnsembleClass(const Probabilities& probabilities, size_t h,
                                      double penalty, std::vector<double>& mean,
                                      double& confidence) const {
  const int begin = head_offsets_[h], classes = heads_[h].classes();
  mean.assign(classes, 0.0);
  for (const auto& p : probabilities) {
    for (int k = 0; k < classes; ++k) mean[k] += p[begin + k] / probabilities.size();
  }
  const int best =
      static_cast<int>(std::max_element(mean.begin(), mean.end()) - mean.begin());
  confidence = mean[best] * penalty;  // The mean of the members' probabilities.
  return best;
}

int GpuMemNetEstimator::WriteMemory(const Probabilities& probabilities, double penalty,
                                    v1::EstimatorResult& result) const {
  std::vector<double> mean;
  double confidence = 0;
  const HeadSpec& mh = heads_[served_head_];
  const int bin = EnsembleClass(probabilities, served_head_, penalty, mean, confidence);
  v1::MemoryEstimate& memory = *result.mutable_memory();
  const int top = mh.classes() - 1;
  for (int k = 0; k <= top; ++k) {
    v1::MemoryBin& b = *memory.add_bins();
    b.set_lower_bytes(static_cast<uint64_t>(mh.edges[k]));
    b.set_upper_bytes(k < top ? static_cast<uint64_t>(mh.edges[k + 1]) : 0);
    b.set_probability(mean[k]);
  }
  memory.set_predicted_bin(bin);
  if (bin < top) {
    memory.set_upper_bytes(static_cast<uint64_t>(mh.edges[bin + 1]));
    memory.set_point_bytes(
        static_cast<uint64_t>((mh.edges[bin] + mh.edges[bin + 1]) / 2));
  } else {
    // More than the A100 holds: a figure that does not fit it, and no upper bound.
    memory.set_upper_bytes(0);
    memory.set_point_bytes(static_cast<uint64_t>(mh.edges[top]) + mh.width_bytes);
  }
  result.set_confidence(confidence);
  return bin;
}

void GpuMemNetEstimator::WriteUtilization(const Probabilities& probabilities,
                                          double penalty,
                                          v1::EstimatorResult& result) const {
  std::vector<double> mean;
  for (size_t h = 0; h < heads_.size(); ++h) {
    if (heads_[h].target != HeadTarget::kUtilization) continue;
    double c = 0;
    const int k = EnsembleClass(probabilities, h, penalty, mean, c);
    v1::UtilizationEstimate& u = *result.add_utilization();
    u.set_metric(UtilizationMetricOf(heads_[h].metric));
    for (double e : heads_[h].edges) u.add_bin_edges(e);
    for (double p : mean) u.add_probabilities(p);
    u.set_predicted_class(k);
    u.set_confidence(c);
  }
}

std::string GpuMemNetEstimator::Basis(bool above_the_card,
                                      const std::vector<std::string>& caveats) const {
  std::string basis = absl::StrCat(
      "GPUMemNet ", common::FamilyName(spec_.family), " ",
      transformer_ ? "Transformer" : "MLP", "-based ensemble of ", members_.size(),
      " classifiers (A100 40GB measurements): ",
      GiBText(heads_[served_head_].width_bytes),
      " bins, point = the predicted bin's midpoint, upper = its upper edge",
      above_the_card ? " (predicted > 40 GiB: did not fit the A100 40GB)" : "",
      "; confidence = mean over members of each member's probability for the "
      "ensemble's class");
  if (!caveats.empty()) {
    absl::StrAppend(&basis, ", halved for each warning (", absl::StrJoin(caveats, "; "),
                    ")");
  }
  return basis;
}

}  // namespace

absl::StatusOr<std::unique_ptr<core::Estimator>> CreateGpuMemNetEstimator(
    const core::ModelArtifact& artifact, const core::RegistryOptions& options) {
  if (options.device != "cpu" && options.device != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", options.device, "': want cpu|cuda"));
  }
  return GpuMemNetEstimator::Load(artifact, options.device);
}

}  // namespace gpuest::gpumemnet
