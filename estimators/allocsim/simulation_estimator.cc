#include "estimators/allocsim/simulation_estimator.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model_family.h"
#include "common/status_macros.h"
#include "common/units.h"
#include "estimators/allocsim/layer_trace.h"
#include "estimators/allocsim/memory_model.h"
#include "estimators/allocsim/parallelism.h"
#include "estimators/allocsim/population.h"
#include "estimators/allocsim/simulation_manifest.h"
#include "estimators/core/layer_types.h"
#include "estimators/core/stack_context.h"

namespace gpuest::allocsim {
namespace {

// What the replayed step holds, by mechanism, that no calibration term adds again: the
// optimizer's state (its bytes in the trace), cuDNN's convolution workspaces (simulated
// per call where the trace holds them) and the growth across steps (the replay runs
// until the reserved peak settles).
std::string InTheStep(const v1::ModelDescription& model, const v1::AllocationTrace& trace,
                      int steps_replayed) {
  uint64_t state = 0;
  int workspaces = 0;
  for (int i = 0; i < trace.size_bytes_size(); ++i) {
    const v1::AllocationCategory c = trace.category_size() > i
                                         ? trace.category(i)
                                         : v1::ALLOCATION_CATEGORY_UNSPECIFIED;
    if (c == v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE) state += trace.size_bytes(i);
    workspaces += c == v1::ALLOCATION_CATEGORY_WORKSPACE;
  }
  return absl::StrCat(
      "; in the step, so in no term: the optimizer's state (",
      absl::StrFormat("%.0f MiB", common::InMiB(static_cast<double>(state))), ", ",
      v1::Optimizer_Name(model.optimizer()), ")",
      workspaces == 0
          ? ""
          : absl::StrCat(", ", workspaces,
                         " cuDNN convolution workspaces simulated where they happen"),
      ", the growth across steps (", steps_replayed, " replayed)");
}

// What is known of cuDNN benchmark mode's transient: the search allocates the largest
// candidate algorithm's workspace that the free memory allows (ATen native/cudnn
// Conv_v7.cpp getMaxWorkspaceSize; Conv_v8.cpp generate_and_filter_plans, through
// CUDACachingAllocator::cacheInfo, whose first guess is cudaMemGetInfo's free bytes),
// so its size depends on the cuDNN version and the free memory, not on the trace.
constexpr char kCudnnSearchKnownSize[] =
    "up to the free memory: the search takes the largest candidate workspace that fits. "
    "Measured (data/h200-benchmark-mode, H200, torch 2.11, five timm models): the first "
    "step reserved 4.8-5.9x what the same step reserves without benchmark mode "
    "(4.4-29 GiB more), the steady state 0.96-1.14x; capped at the benchmark-off need, "
    "all five completed. On the A100 40GB (shared timm data, torch 2.4.1), 39 runs "
    "marked SPIKE peaked at up to the card's 40 GB";

// cuDNN benchmark mode's transient, where the job runs the search: as it says, or, when
// it does not say, for a model with convolutions, since the common image-training
// scripts (timm's train.py, torchvision's references) turn benchmark mode on.
std::optional<v1::MemoryTransient> CudnnBenchmarkTransient(
    const v1::ModelDescription& model, const core::GpuProfile& gpu) {
  if (model.has_cudnn_benchmark() && !model.cudnn_benchmark()) return std::nullopt;
  if (!HasConvolution(model)) return std::nullopt;
  v1::MemoryTransient t;
  t.set_cause(v1::TRANSIENT_CAUSE_CUDNN_BENCHMARK);
  t.set_reach_bytes(gpu.memory_bytes);
  t.set_when("the first training step, for each new convolution input shape");
  t.set_known_size(kCudnnSearchKnownSize);
  t.set_declared(model.has_cudnn_benchmark());
  return t;
}

// Scores on one population of runs the calibration never saw, as the response carries
// them; nothing where there are none.
void AddBoundValidation(const std::optional<HeldOutScores>& scores,
                        std::string population, double target_safe_share,
                        std::vector<v1::BoundValidation>& out) {
  if (!scores) return;
  v1::BoundValidation& v = out.emplace_back();
  v.set_population(std::move(population));
  v.set_runs(scores->rows);
  v.set_safe_share(scores->safe);
  v.set_safe_and_tight_share(scores->safe_and_tight);
  v.set_target_safe_share(target_safe_share);
}

// The family's scores on runs its calibration never saw.
std::vector<v1::BoundValidation> BoundValidations(const FamilyTerms& terms,
                                                  const SimulationManifest& m) {
  std::vector<v1::BoundValidation> out;
  AddBoundValidation(terms.held_out,
                     absl::StrCat("GPUMemNet held-out ", TermsName(terms), " runs on ",
                                  m.gpu, " (synthetic models no fit saw)"),
                     m.safe_quantile, out);
  // Terms fitted on clean runs were scored on those (their dataset's file names them).
  std::string clean_runs;
  for (const core::manifest::DatasetDigest& d : terms.datasets) {
    if (absl::StartsWith(d.role, "clean runs")) clean_runs = d.file;
  }
  AddBoundValidation(
      terms.unseen_architectures,
      clean_runs.empty()
          ? absl::StrCat("real timm ", TermsName(terms), "-family runs on ", m.gpu,
                         ", each scored by a fit that never saw its architecture group")
          : absl::StrCat("clean runs (cuDNN benchmark off, uncapped) of real timm ",
                         TermsName(terms), "-family models (", clean_runs,
                         "), each scored by a fit that never saw its architecture group"),
      m.safe_quantile, out);
  return out;
}

// A GPU's own terms, scored on its clean runs, each by a fit that never saw the run's
// architecture group.
std::vector<v1::BoundValidation> GpuBoundValidations(const FamilyTerms& terms,
                                                     const GpuTerms& gpu,
                                                     const SimulationManifest& m) {
  std::vector<v1::BoundValidation> out;
  AddBoundValidation(
      terms.unseen_architectures,
      absl::StrCat("clean runs (cuDNN benchmark off, uncapped) of real timm ",
                   TermsName(terms), "-family models on ", gpu.gpu,
                   ", each scored by a fit that never saw its architecture group"),
      m.safe_quantile, out);
  return out;
}

// A bound that held on fewer unseen runs than it is fitted for says so.
void WarnWhereBelowTarget(const v1::MemoryEstimate& memory, const std::string& id,
                          std::vector<v1::Warning>& warnings) {
  for (const v1::BoundValidation& v : memory.upper_validation()) {
    if (v.safe_share() >= v.target_safe_share()) continue;
    warnings.push_back(core::MakeWarning(
        v1::WARNING_CODE_BOUND_BELOW_TARGET,
        absl::StrFormat("the upper bound held on %.1f %% of %d %s, short of the %.0f %% "
                        "it is fitted for: reserve more than the bound for a job like "
                        "these",
                        100 * v.safe_share(), v.runs(), v.population(),
                        100 * v.target_safe_share()),
        id));
  }
}

// Without the layers' inputs the layer rule cannot see a tensor that no module made (a
// DenseNet block's torch.cat): on GPUMemNet's DenseNet-like CNNs the served bound then
// falls short on most runs (README, the analytic estimator's row). An MLP's dense
// layers feed one another: nothing to miss.
void WarnWhereLayerInputsUnknown(const v1::ModelDescription& model, const std::string& id,
                                 std::vector<v1::Warning>& warnings) {
  if (model.family() == v1::MODEL_FAMILY_MLP) return;
  for (const v1::Layer& layer : model.layers()) {
    if (layer.input_activations() > 0) return;
  }
  warnings.push_back(core::MakeWarning(
      v1::WARNING_CODE_LAYER_INPUTS_UNKNOWN,
      "the layers do not give their inputs (input_activations): a tensor made between "
      "modules, such as a DenseNet block's torch.cat, is not counted, and the bound "
      "held on 26 % of such CNNs measured without them (96 % with them); describe the "
      "model with gpuest.describe, which records each layer's input",
      id));
}

absl::string_view UncertaintyWords(v1::Uncertainty why) {
  switch (why) {
    case v1::UNCERTAINTY_UNKNOWN_TYPE:
      return "type not in the layer table";
    case v1::UNCERTAINTY_MADE_BETWEEN_MODULES:
      return "reads a tensor made between modules";
    case v1::UNCERTAINTY_OUTPUT_READ_BETWEEN_MODULES:
      return "its output read only between modules";
    default:
      return "uncertain";
  }
}

// The basis's words on what the layer rules could not settle, largest first.
std::string DescribeUncertainLayers(const LayerStep& step, double safe_factor) {
  if (step.uncertain.empty()) {
    return "the layer rules explain every layer: no widening for uncertain layers";
  }
  std::vector<const v1::UncertainLayers*> groups;
  for (const v1::UncertainLayers& g : step.uncertain) groups.push_back(&g);
  std::stable_sort(groups.begin(), groups.end(),
                   [](auto* a, auto* b) { return a->bytes() > b->bytes(); });
  constexpr size_t kNamed = 5;
  std::string named;
  for (size_t k = 0; k < std::min(groups.size(), kNamed); ++k) {
    const v1::UncertainLayers& g = *groups[k];
    absl::StrAppend(
        &named, k > 0 ? ", " : "", g.type(), " x", g.count(), " (",
        UncertaintyWords(g.uncertainty()),
        g.first_name().empty() ? "" : absl::StrCat(", first ", g.first_name()), ") ",
        absl::StrFormat("%.0f MiB", common::InMiB(g.bytes())));
  }
  if (groups.size() > kNamed) {
    absl::StrAppend(&named, " and ", groups.size() - kNamed, " more");
  }
  return absl::StrFormat(
      "uncertain layers (memory.uncertain_layers): %s; they may hold %.0f MiB beyond the "
      "built step, and the upper bound adds x%.3f of it (%.0f MiB) for this job",
      named, common::InMiB(step.uncertain_bytes), safe_factor,
      safe_factor * common::InMiB(step.uncertain_bytes));
}

struct RetryVerdict {
  v1::AllocatorRetry verdict = v1::ALLOCATOR_RETRY_UNSPECIFIED;
  int alloc_retries = 0;  // In the replay on the card-sized allocator.
};

// Whether the caching allocator's release-and-retry is needed on the card, and whether
// it saves the step: when the upper bound exceeds the card, the step is replayed on an
// allocator holding only the share of the card the calibration leaves it.
absl::StatusOr<RetryVerdict> JudgeAllocatorRetry(
    const v1::AllocationTrace& trace, const core::GpuProfile& gpu, AllocatorConfig config,
    const FamilyCalibration& calibration, double largest_conv_output_mib, int steps,
    const v1::MemoryEstimate& memory, const common::WorkDeadline& deadline) {
  if (memory.upper_bytes() <= gpu.memory_bytes) {
    return RetryVerdict{v1::ALLOCATOR_RETRY_NOT_NEEDED, 0};
  }
  config.capacity_bytes = AllocatorCapacity(gpu, calibration, largest_conv_output_mib);
  GPUEST_ASSIGN_OR_RETURN(const ReplayResult on_card,
                          SimulatePeak(trace, gpu, config, steps, deadline));
  if (on_card.out_of_memory) return RetryVerdict{v1::ALLOCATOR_RETRY_DOES_NOT_SAVE_IT, 0};
  return RetryVerdict{v1::ALLOCATOR_RETRY_SAVES_IT, on_card.alloc_retries};
}

// The allocator settings the job runs with (PYTORCH_CUDA_ALLOC_CONF).
AllocatorConfig AllocatorConfigOf(const v1::ModelDescription& model) {
  AllocatorConfig config;
  if (model.has_allocator()) {
    if (model.allocator().max_split_size_mb() > 0) {
      config.max_split_size = model.allocator().max_split_size_mb() * common::kMiB;
    }
    config.expandable_segments = model.allocator().expandable_segments();
  }
  return config;
}

// The calibration with a stand-in for cuDNN's workspaces where a trace of a model with
// convolutions holds none, and a warning where it adds one.
FamilyCalibration WithStandInWorkspaces(const FamilyCalibration& calibration,
                                        const v1::ModelDescription& model,
                                        const v1::AllocationTrace& trace,
                                        double conv_output_mib, const std::string& id,
                                        std::vector<v1::Warning>& warnings) {
  bool stand_in = false;
  FamilyCalibration with = WithUntracedWorkspaces(calibration, model, trace, &stand_in);
  if (stand_in) {
    warnings.push_back(core::MakeWarning(
        v1::WARNING_CODE_TRACE_CAVEAT,
        absl::StrFormat(
            "the model has convolutions but its trace holds none of cuDNN's "
            "workspaces (an older gpuest.describe made it): the upper bound adds "
            "%.0f x the largest convolution output (%.0f MiB) for them; describe "
            "the job again for a bound that simulates each one",
            kUntracedWorkspacePerConvOutput, conv_output_mib),
        id));
  }
  return with;
}

// The card with the context of the job's own stack, calibrated where that context was
// measured; the context's warning where it was not.
core::GpuProfile WithContext(const core::GpuProfile& card,
                             const core::ContextChoice& context, const std::string& id,
                             std::vector<v1::Warning>& warnings) {
  core::GpuProfile gpu = card;
  gpu.context_bytes = context.bytes;
  gpu.constants_calibrated =
      context.measured || (card.constants_calibrated && context.warning.empty());
  if (!context.warning.empty()) {
    warnings.push_back(
        core::MakeWarning(v1::WARNING_CODE_ASSUMED_GPU_CONSTANTS, context.warning, id));
  }
  return gpu;
}

// The retry verdict's word: a warning where the allocator's retry saves the step, else
// the basis's note where nothing does (empty where the step fits).
std::string NoteAllocatorRetry(const RetryVerdict& retry,
                               const v1::MemoryEstimate& memory,
                               const core::GpuProfile& gpu, const std::string& id,
                               std::vector<v1::Warning>& warnings) {
  if (retry.verdict == v1::ALLOCATOR_RETRY_SAVES_IT) {
    warnings.push_back(core::MakeWarning(
        v1::WARNING_CODE_ALLOCATOR_RETRIES,
        absl::StrFormat(
            "the upper bound (%.2f GiB) exceeds %s's %.2f GiB; replayed with the "
            "allocator limited to what the card leaves it, the step completes only "
            "because the caching allocator empties its cache and retries (%d times "
            "in the simulated steps): it may run, with slower steps and no safety "
            "margin",
            common::InGiB(memory.upper_bytes()), gpu.id, common::InGiB(gpu.memory_bytes),
            retry.alloc_retries),
        id));
  } else if (retry.verdict == v1::ALLOCATOR_RETRY_DOES_NOT_SAVE_IT) {
    return absl::StrCat("; does not fit ", gpu.id,
                        " even after the allocator empties its cache");
  }
  return "";
}

// cuDNN benchmark mode's transient into the estimate, with its warning, where the job
// runs the search.
void AddCudnnBenchmarkTransient(const v1::ModelDescription& model,
                                const core::GpuProfile& gpu, v1::MemoryEstimate& memory,
                                const std::string& id,
                                std::vector<v1::Warning>& warnings) {
  std::optional<v1::MemoryTransient> transient = CudnnBenchmarkTransient(model, gpu);
  if (!transient) return;
  warnings.push_back(core::MakeWarning(
      v1::WARNING_CODE_CUDNN_BENCHMARK_TRANSIENT,
      absl::StrFormat(
          "the job %s cuDNN benchmark mode and has convolutions: uncapped, its first "
          "step can take up to %s's free memory (%.2f GiB on an empty card); the "
          "requirement (%.2f GiB) holds when the job is capped at it "
          "(recommendation.cap: a HAMi limit, "
          "torch.cuda.set_per_process_memory_fraction, or "
          "torch.backends.cudnn.benchmark = False)",
          transient->declared() ? "sets" : "does not say whether it sets (assumed on:)",
          gpu.id, common::InGiB(transient->reach_bytes()),
          common::InGiB(memory.upper_bytes())),
      id));
  *memory.mutable_transient() = *std::move(transient);
}

// For a card whose constants are assumptions (the caller's test): the warning, unless
// the context's own warning has said so.
void WarnWhereConstantsAssumed(const core::GpuProfile& gpu,
                               const core::ContextChoice& context, const std::string& id,
                               std::vector<v1::Warning>& warnings) {
  if (!context.warning.empty()) return;
  warnings.push_back(core::MakeWarning(
      v1::WARNING_CODE_ASSUMED_GPU_CONSTANTS,
      absl::StrCat(gpu.id,
                   "'s context and workspace sizes are assumptions, not "
                   "measurements: ",
                   gpu.constants_basis),
      id));
}

// What one estimate works out, step by step; its basis says it.
struct Estimation {
  // The step replayed: the request's trace, or one built from the layers (its trace
  // moved to built); for a job over several GPUs, one rank's (every figure per GPU).
  LayerStep layers;
  std::optional<v1::AllocationTrace> built;
  std::optional<RankTrace> rank;
  // The calibration taken, how often its bound held, where it was scored, its name.
  FamilyCalibration calibration;
  double confidence = 0;
  const std::vector<v1::BoundValidation>* validations = nullptr;
  std::string calibration_name = "most conservative";
  PopulationChoice population;
  double conv_output_mib = 0;
  core::ContextChoice context;  // Of the job's own stack (stack_context.h).
  core::GpuProfile gpu;         // The card, with that context.
  ReplayResult replay;
  std::string fit_note;  // Where the step does not fit even after the retry.

  const v1::AllocationTrace& Trace(const v1::ModelDescription& model) const {
    return rank ? rank->trace : built ? *built : model.trace();
  }
};

class SimulationEstimator final : public core::Estimator {
 public:
  const v1::EstimatorInfo& Info() const override { return info_; }

  bool AppliesTo(const core::EstimationInput& input) const override {
    if (!input.request.has_model()) return false;
    const v1::ModelDescription& model = input.request.model();
    const bool traced = model.has_trace() && model.trace().size_bytes_size() > 0;
    if (source_ == TraceSource::kRequest) return traced;
    // The layer rules approximate what a trace records; with a trace they answer only
    // when asked for by name.
    const auto& asked = input.request.estimators();
    return model.layers_size() > 0 &&
           (!traced || std::find(asked.begin(), asked.end(), info_.id()) != asked.end());
  }

  absl::Status Estimate(const core::EstimationInput& input, v1::EstimatorResult& result,
                        std::vector<v1::Warning>& warnings) const override {
    const v1::ModelDescription& model = input.request.model();
    const std::string& id = info_.id();
    Estimation e;
    BuildStep(model, e, warnings);
    const v1::AllocationTrace& trace = e.Trace(model);
    ChooseCalibration(input, e, result, warnings);
    e.conv_output_mib = LargestConvOutputMib(model);
    if (source_ == TraceSource::kRequest) {
      e.calibration = WithStandInWorkspaces(e.calibration, model, trace,
                                            e.conv_output_mib, id, warnings);
    }
    const AllocatorConfig config = AllocatorConfigOf(model);
    // The context of the job's own stack (stack_context.h), where one was measured.
    e.context = core::ChooseContext(input.gpu, model);
    e.gpu = WithContext(input.gpu, e.context, id, warnings);
    GPUEST_ASSIGN_OR_RETURN(e.replay,
                            SimulatePeak(trace, e.gpu, config, steps_, input.deadline));
    e.replay.uncertain_bytes = e.layers.uncertain_bytes;
    v1::MemoryEstimate memory =
        CalibratedEstimate(e.replay, e.gpu, e.calibration, e.conv_output_mib);
    memory.mutable_uncertain_layers()->Assign(e.layers.uncertain.begin(),
                                              e.layers.uncertain.end());
    // The estimate stays the step's whole need even where it exceeds the card: a bound
    // capped at the card would say "fits" of a job that needs more. Whether the
    // allocator's cache release and retry would still let it run is a separate verdict.
    GPUEST_ASSIGN_OR_RETURN(
        const RetryVerdict retry,
        JudgeAllocatorRetry(trace, e.gpu, config, e.calibration, e.conv_output_mib,
                            steps_, memory, input.deadline));
    memory.set_allocator_retry(retry.verdict);
    if (e.validations != nullptr) {
      memory.mutable_upper_validation()->Assign(e.validations->begin(),
                                                e.validations->end());
      WarnWhereBelowTarget(memory, id, warnings);
    }
    e.fit_note = NoteAllocatorRetry(retry, memory, e.gpu, id, warnings);
    AddCudnnBenchmarkTransient(model, e.gpu, memory, id, warnings);
    if (!e.gpu.constants_calibrated) {
      WarnWhereConstantsAssumed(e.gpu, e.context, id, warnings);
      e.confidence /= 2;  // As the classifiers do for a GPU they were not measured on.
    }
    *result.mutable_memory() = std::move(memory);
    result.set_confidence(e.confidence);
    result.set_basis(Basis(model, trace, e));
    return absl::OkStatus();
  }

 private:
  friend absl::StatusOr<std::unique_ptr<core::Estimator>>
  allocsim::CreateSimulationEstimator(const core::ModelArtifact&,
                                      const core::RegistryOptions&);

  // The step to replay (Estimation's first fields), with the warnings on how it was
  // built.
  void BuildStep(const v1::ModelDescription& model, Estimation& e,
                 std::vector<v1::Warning>& warnings) const {
    if (source_ == TraceSource::kLayers) {
      e.layers = StepFromLayers(model);
      e.built = std::move(e.layers.trace);
      WarnWhereLayerInputsUnknown(model, info_.id(), warnings);
    }
    // A job over several GPUs: one rank's step (every figure below is per GPU).
    if (model.has_parallelism() && SpreadsOverGpus(model.parallelism())) {
      e.rank = PerRankTrace(e.built ? *e.built : model.trace(), model.parallelism());
      if (e.rank->unit_guessed) {
        warnings.push_back(core::MakeWarning(
            v1::WARNING_CODE_ASSUMED_SHARDING_UNIT,
            "parallelism.largest_unit_bytes is not given: the sharded unit is taken as "
            "the largest parameter tensor, smaller than an FSDP-wrapped block; describe "
            "the job with gpuest.describe(..., parallelism=...) to record it",
            info_.id()));
      }
    }
  }

  // The calibration the job takes: the GPU's own terms where clean runs on it
  // calibrated the family, else the calibrated GPU's; the population by what the
  // description shows (population.h), never by its optimizer: the optimizer's state is
  // in the trace.
  void ChooseCalibration(const core::EstimationInput& input, Estimation& e,
                         v1::EstimatorResult& result,
                         std::vector<v1::Warning>& warnings) const {
    const v1::ModelDescription& model = input.request.model();
    const v1::ModelFamily family = input.features.family();
    e.calibration = fallback_;
    e.confidence = fallback_confidence_;
    const bool without_convolutions = WithoutConvolutions(model);
    e.population = ChoosePopulation(model);
    const bool synthetic = e.population.population == Population::kSynthetic;
    const Family* calibrated = nullptr;
    if (const auto own = by_gpu_.find(input.gpu.id); own != by_gpu_.end()) {
      calibrated = Find(own->second, family, without_convolutions, synthetic);
    }
    if (calibrated == nullptr) {
      calibrated = Find(families_, family, without_convolutions, synthetic);
    }
    // Without measurements of the family the calibration is a guess (the most
    // conservative family's terms): out of its distribution.
    result.set_in_distribution(calibrated != nullptr);
    if (calibrated != nullptr) {
      e.calibration = calibrated->calibration;
      e.confidence = calibrated->confidence;
      e.validations = &calibrated->validations;
      e.calibration_name = calibrated->name;
    } else {
      warnings.push_back(core::MakeWarning(
          v1::WARNING_CODE_UNCALIBRATED_FAMILY,
          absl::StrCat("no measurements of the ", common::FamilyName(family),
                       " family calibrate this estimator; it used the most conservative "
                       "family's terms"),
          info_.id()));
    }
  }

  std::string Basis(const v1::ModelDescription& model, const v1::AllocationTrace& trace,
                    const Estimation& e) const {
    const TermMechanisms why =
        MechanismsOf(e.population.population, source_ == TraceSource::kLayers);
    std::string basis = absl::StrFormat(
        "%s: %d allocations replayed for %d training steps (until the reserved peak "
        "settled) through the caching-allocator "
        "simulation: peak allocated %.0f MiB, reserved %.0f MiB%s; plus %s's context "
        "%.0f MiB (%s) and the %s calibration, for the job's population (%s): upper "
        "+%.0f MiB (%s), x%.3f (%s), + %.2f x the largest convolution output %.0f MiB "
        "= %.0f MiB%s%s",
        source_ == TraceSource::kRequest ? "the request's trace"
                                         : "a step built from the layer sequence",
        trace.size_bytes_size(), e.replay.steps_replayed,
        common::InMiB(e.replay.peak_allocated_bytes),
        common::InMiB(e.replay.peak_reserved_bytes),
        InTheStep(model, trace, e.replay.steps_replayed), e.gpu.id,
        common::InMiB(e.gpu.context_bytes), e.context.basis, e.calibration_name,
        e.population.basis, e.calibration.intercept_mib, why.intercept,
        e.calibration.safe_factor, why.factor, e.calibration.conv_output_factor,
        e.conv_output_mib, e.calibration.conv_output_factor * e.conv_output_mib,
        e.calibration.conv_output_factor > 0 ? absl::StrCat(" (", why.conv_output, ")")
                                             : "",
        e.fit_note);
    if (source_ == TraceSource::kLayers) {
      absl::StrAppend(&basis, "; ",
                      DescribeUncertainLayers(e.layers, e.calibration.safe_factor));
    }
    if (e.rank)
      absl::StrAppend(&basis, "; per GPU, one rank of the job: ", e.rank->basis);
    return basis;
  }
  struct Family {
    std::string name;  // For the basis: "transformer (without convolutions)".
    FamilyCalibration calibration;
    double confidence = 0.5;
    std::vector<v1::BoundValidation> validations;  // Where the upper bound was scored.
  };
  // A family, whether the terms are its models' without a convolution
  // (FamilyTerms::without_convolutions), and whether GPUMemNet's generated models'
  // (FamilyTerms::synthetic).
  using TermsSetKey = std::tuple<v1::ModelFamily, bool, bool>;
  using TermsSet = std::map<TermsSetKey, Family>;

  // One family's terms into a set, under name (the basis says it), with where its
  // upper bound was scored; InvalidArgument names where (the manifest's key) for a
  // family gpuest does not know.
  static absl::StatusOr<const Family*> AddTerms(
      TermsSet& set, const FamilyTerms& terms, std::string name,
      std::vector<v1::BoundValidation> validations, const std::string& where) {
    const std::optional<v1::ModelFamily> family = common::FamilyFromName(terms.family);
    if (!family) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " has an unknown family '", terms.family, "'"));
    }
    Family& f = set[{*family, terms.without_convolutions, terms.synthetic}];
    f.name = std::move(name);
    f.calibration = terms.calibration;
    // How often the upper bound was both safe and close: on GPUMemNet's held-out runs,
    // else on runs of architecture groups its fit never saw.
    f.confidence = terms.held_out ? terms.held_out->safe_and_tight
                   : terms.unseen_architectures
                       ? terms.unseen_architectures->safe_and_tight
                       : 0.5;
    f.validations = std::move(validations);
    return &f;
  }

  // The family's terms in one set; for a synthetic model, its family's synthetic terms
  // where the set has them; for a model without a convolution, its family's terms
  // measured without convolutions where the set has them. Null: none.
  static const Family* Find(const TermsSet& terms, v1::ModelFamily family,
                            bool without_convolutions, bool synthetic) {
    if (synthetic) {
      if (const auto it = terms.find({family, false, true}); it != terms.end()) {
        return &it->second;
      }
    }
    if (without_convolutions) {
      if (const auto it = terms.find({family, true, false}); it != terms.end()) {
        return &it->second;
      }
    }
    const auto it = terms.find({family, false, false});
    return it == terms.end() ? nullptr : &it->second;
  }

  v1::EstimatorInfo info_;
  TraceSource source_ = TraceSource::kRequest;
  int steps_ = 2;
  TermsSet families_;
  // GPU id -> its own terms (SimulationManifest::by_gpu), for the families they cover.
  std::map<std::string, TermsSet> by_gpu_;
  FamilyCalibration fallback_;  // The most conservative terms of all families.
  double fallback_confidence_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<core::Estimator>> CreateSimulationEstimator(
    const core::ModelArtifact& artifact, const core::RegistryOptions&) {
  const std::string file = absl::StrCat(artifact.directory, "/manifest.json");
  GPUEST_ASSIGN_OR_RETURN(const SimulationManifest m,
                          SimulationManifest::Parse(artifact.manifest_text, file));
  auto e = std::make_unique<SimulationEstimator>();
  v1::EstimatorInfo& info = e->info_;
  info.set_id(m.id);
  info.set_kind(v1::ESTIMATOR_KIND_SIMULATOR);
  info.set_family(v1::MODEL_FAMILY_UNSPECIFIED);
  info.set_version(m.version);
  info.set_description(m.description);
  info.set_estimates_memory(true);
  e->source_ = m.trace_source;
  e->steps_ = m.steps;
  for (const FamilyTerms& terms : m.families) {
    GPUEST_ASSIGN_OR_RETURN(
        const SimulationEstimator::Family* f,
        SimulationEstimator::AddTerms(e->families_, terms, TermsName(terms),
                                      BoundValidations(terms, m),
                                      absl::StrCat(file, ": 'calibration.families'")));
    const FamilyCalibration& t = f->calibration;
    FamilyCalibration& worst = e->fallback_;
    worst.intercept_mib = std::max(worst.intercept_mib, t.intercept_mib);
    worst.point_intercept_mib =
        std::max(worst.point_intercept_mib, t.point_intercept_mib);
    worst.point_factor = std::max(worst.point_factor, t.point_factor);
    worst.safe_factor = std::max(worst.safe_factor, t.safe_factor);
    worst.conv_output_factor = std::max(worst.conv_output_factor, t.conv_output_factor);
    auto& metrics = *info.mutable_training_metrics();
    for (const auto& [name, scores] :
         {std::pair{"held_out", &terms.held_out},
          std::pair{"unseen_architecture", &terms.unseen_architectures}}) {
      if (!*scores) continue;
      const std::string key =
          TermsKey(terms.family, terms.without_convolutions, terms.synthetic);
      metrics[absl::StrCat(key, "_", name, "_mape")] = (*scores)->mape;
      metrics[absl::StrCat(key, "_", name, "_safe")] = (*scores)->safe;
      metrics[absl::StrCat(key, "_", name, "_safe_and_tight")] =
          (*scores)->safe_and_tight;
    }
  }
  for (const GpuTerms& g : m.by_gpu) {
    for (const FamilyTerms& terms : g.families) {
      GPUEST_RETURN_IF_ERROR(
          SimulationEstimator::AddTerms(
              e->by_gpu_[g.gpu], terms,
              absl::StrCat(g.gpu, " ", TermsName(terms),
                           " (fitted on clean runs on that GPU)"),
              GpuBoundValidations(terms, g, m),
              absl::StrCat(file, ": 'calibration.by_gpu.", g.gpu, ".families'"))
              .status());
    }
  }
  return std::unique_ptr<core::Estimator>(std::move(e));
}

}  // namespace gpuest::allocsim
