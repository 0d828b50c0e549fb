#include "estimators/core/request_validation.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "requests/trace_batch.h"

namespace gpuest::core {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// Bytes a step of this size touches, at the widest element (8 B): far above any GPU
// (a million TiB) long before the arithmetic of an estimator could wrap (1.8e19).
constexpr double kMaxStepBytes = 1e18;

constexpr size_t kMaxEstimatorIdLength = 128;

absl::Status CheckCount(absl::string_view field, int64_t value, int64_t max) {
  if (value < 0) return Invalid(field, absl::StrCat("must be non-negative, got ", value));
  if (value > max)
    return Invalid(field, absl::StrCat("must be at most ", max, ", got ", value));
  return absl::OkStatus();
}

// A number of item i of a repeated field (model.layers[i].parameters), checked against
// its row; the path is built only when it fails.
template <typename T>
absl::Status CheckItem(const FieldBound& bound, T value, absl::string_view list, int i,
                       absl::string_view name, const ValidationLimits& limits) {
  if (InBounds(bound, static_cast<double>(value), limits)) return absl::OkStatus();
  return CheckField(bound, value, absl::StrCat(list, "[", i, "]", name), limits);
}

// The trace's batch, its length and that its columns are one length.
absl::Status CheckTraceColumns(const v1::AllocationTrace& trace,
                               const ValidationLimits& limits) {
  GPUEST_RETURN_IF_ERROR(
      CheckField(kTraceBatchSize, trace.batch_size(), "model.trace.batch_size", limits));
  const int n = trace.size_bytes_size();
  if (n > limits.max_trace_events) {
    return Invalid(
        "model.trace.size_bytes",
        absl::StrCat(n, " events exceed the limit of ", limits.max_trace_events));
  }
  if (trace.alloc_at_size() != n || trace.free_at_size() != n ||
      trace.category_size() != n) {
    return Invalid(
        "model.trace",
        absl::StrCat("columns must have equal lengths (size_bytes ", n, ", alloc_at ",
                     trace.alloc_at_size(), ", free_at ", trace.free_at_size(),
                     ", category ", trace.category_size(), ")"));
  }
  return absl::OkStatus();
}

// Each event, in order: its times, its category and its size. Returns the sizes'
// total. The describer's clock ticks once per allocation and once per free
// (python/gpuest/describe/tracer.py): every time is distinct and at most 2n. A trace
// that breaks this replays as another step (events merged or reordered), so it is
// refused rather than answered.
absl::StatusOr<double> CheckTraceEvents(const v1::AllocationTrace& trace,
                                        const ValidationLimits& limits) {
  const int n = trace.size_bytes_size();
  std::vector<int32_t> owner(2 * static_cast<size_t>(n) + 1, -1);
  auto claim = [&](absl::string_view column, int i, uint32_t at) -> absl::Status {
    GPUEST_RETURN_IF_ERROR(CheckItem(column == "alloc_at" ? kTraceAllocAt : kTraceFreeAt,
                                     uint64_t{at}, absl::StrCat("model.trace.", column),
                                     i, "", limits));
    const std::string field = absl::StrCat("model.trace.", column, "[", i, "]");
    if (at > static_cast<uint32_t>(2 * n)) {
      return Invalid(field, absl::StrCat("time ", at, " is past the trace's end (", 2 * n,
                                         " ticks for ", n, " events)"));
    }
    if (owner[at] >= 0) {
      return Invalid(field, absl::StrCat("time ", at, " is already taken by event ",
                                         owner[at], ": times must be distinct"));
    }
    owner[at] = i;
    return absl::OkStatus();
  };
  double total = 0;
  for (int i = 0; i < n; ++i) {
    GPUEST_RETURN_IF_ERROR(claim("alloc_at", i, trace.alloc_at(i)));
    if (trace.free_at(i) != 0)
      GPUEST_RETURN_IF_ERROR(claim("free_at", i, trace.free_at(i)));
    if (!v1::AllocationCategory_IsValid(trace.category(i)) ||
        trace.category(i) == v1::ALLOCATION_CATEGORY_UNSPECIFIED) {
      return Invalid(absl::StrCat("model.trace.category[", i, "]"),
                     absl::StrCat("unknown category ", trace.category(i)));
    }
    if (trace.free_at(i) != 0 && trace.free_at(i) <= trace.alloc_at(i)) {
      return Invalid(absl::StrCat("model.trace.free_at[", i, "]"),
                     absl::StrCat("must be 0 (alive at the end) or after alloc_at ",
                                  trace.alloc_at(i), ", got ", trace.free_at(i)));
    }
    GPUEST_RETURN_IF_ERROR(CheckItem(kTraceSizeBytes, trace.size_bytes(i),
                                     "model.trace.size_bytes", i, "", limits));
    total += static_cast<double>(trace.size_bytes(i));
  }
  return total;
}

absl::Status CheckTrace(const v1::AllocationTrace& trace,
                        const ValidationLimits& limits) {
  GPUEST_RETURN_IF_ERROR(CheckTraceColumns(trace, limits));
  GPUEST_ASSIGN_OR_RETURN(const double total, CheckTraceEvents(trace, limits));
  // The replay adds sizes in 64 bits.
  if (total > kMaxStepBytes) {
    return Invalid(
        "model.trace.size_bytes",
        absl::StrCat("the allocations add up to ", total, " bytes, beyond any GPU"));
  }
  return absl::OkStatus();
}

// Every product an estimator forms of a batch and a per-sample count (a layer's input
// or output, the parameters) is at most this, so none wraps 64 bits.
absl::Status CheckStepSize(absl::string_view field, int64_t batch, int64_t activations,
                           int64_t parameters) {
  // In double: the product itself is what could overflow 64 bits.
  const double bytes =
      8.0 * static_cast<double>(batch) *
      (static_cast<double>(activations) + static_cast<double>(parameters));
  if (bytes > kMaxStepBytes) {
    return Invalid(field, absl::StrCat("a batch of ", batch, " over ", activations,
                                       " activations and ", parameters,
                                       " parameters per sample is beyond any GPU (",
                                       bytes, " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckFeatures(const v1::FeatureVector& f, const ValidationLimits& limits) {
  if (!v1::ModelFamily_IsValid(f.family())) {
    return Invalid("features.family", absl::StrCat("unknown value ", f.family()));
  }
  if (!v1::Optimizer_IsValid(f.optimizer())) {
    return Invalid("features.optimizer", absl::StrCat("unknown value ", f.optimizer()));
  }
  GPUEST_RETURN_IF_ERROR(
      CheckField(kFeaturesBatchSize, f.batch_size(), "features.batch_size", limits));
  GPUEST_RETURN_IF_ERROR(CheckField(kFeaturesParameters, f.total_parameters(),
                                    "features.total_parameters", limits));
  GPUEST_RETURN_IF_ERROR(CheckField(kFeaturesActivations, f.total_activations(),
                                    "features.total_activations", limits));
  GPUEST_RETURN_IF_ERROR(CheckField(kFeaturesDepth, f.depth(), "features.depth", limits));
  GPUEST_RETURN_IF_ERROR(CheckField(kFeaturesSequenceLength, f.sequence_length(),
                                    "features.sequence_length", limits));
  for (const auto& [type, count] : f.layer_counts()) {
    if (type.empty()) return Invalid("features.layer_counts", "a layer type is empty");
    // The same bound as a layer's type (model.layers[i]); checked before the type goes
    // into a field path, so that a refusal never echoes a long key whole.
    if (static_cast<int64_t>(type.size()) > limits.max_name_length) {
      return Invalid("features.layer_counts",
                     absl::StrCat("a layer type longer than ", limits.max_name_length,
                                  " characters (", type.size(), ")"));
    }
    const std::string field = absl::StrCat("features.layer_counts[\"", type, "\"]");
    GPUEST_RETURN_IF_ERROR(CheckField(kFeaturesLayerCount, count, field, limits));
  }
  if (f.total_parameters() == 0 && f.total_activations() == 0) {
    return Invalid("features", "total_parameters and total_activations are both 0");
  }
  return CheckStepSize("features.batch_size", f.batch_size(), f.total_activations(),
                       f.total_parameters());
}

}  // namespace

// Each caveat becomes a warning in the response: a handful of sentences.
constexpr int kMaxTraceCaveats = 16;
constexpr size_t kMaxTraceCaveatLength = 1024;
constexpr size_t kMaxModelSourceLength = 256;  // model_source: module:class.

absl::Status ValidateParallelism(const v1::Parallelism& p) {
  GPUEST_RETURN_IF_ERROR(CheckField(kDataParallel, uint64_t{p.data_parallel()},
                                    "model.parallelism.data_parallel"));
  GPUEST_RETURN_IF_ERROR(CheckField(kTensorParallel, uint64_t{p.tensor_parallel()},
                                    "model.parallelism.tensor_parallel"));
  GPUEST_RETURN_IF_ERROR(CheckField(kLargestUnitBytes, p.largest_unit_bytes(),
                                    "model.parallelism.largest_unit_bytes"));
  if (!v1::Sharding_IsValid(p.sharding())) {
    return Invalid("model.parallelism.sharding",
                   absl::StrCat("unknown value ", static_cast<int>(p.sharding())));
  }
  if (p.offload_parameters() && p.sharding() != v1::SHARDING_PARAMETERS) {
    return Invalid("model.parallelism.offload_parameters",
                   "needs sharding SHARDING_PARAMETERS (only sharded parameters are "
                   "offloaded)");
  }
  return absl::OkStatus();
}

// Fields that state the same thing must agree: a contradiction is refused naming both,
// never answered (a description whose sequence_length says 2^31 while its layers were
// described at 128 tokens would otherwise be sized at 128 and found to fit).
absl::Status CheckFieldsAgree(const v1::ModelDescription& model) {
  // gpuest.describe writes one or the other: a trace, or why there is none.
  if (model.has_trace() && !model.trace_unavailable_reason().empty()) {
    return Invalid("model.trace_unavailable_reason",
                   "is set beside model.trace: a description carries its trace or says "
                   "why it has none, not both");
  }
  const int64_t sequence = model.sequence_length();
  if (sequence <= 0) return absl::OkStatus();
  // A token model's input is one id (or one feature vector) per token: a per-sample
  // shape of rank 1 or 2 starts with the sequence. (An image's [C, H, W] does not: its
  // sequence is its patches.)
  const int rank = model.input_shape_size();
  if ((rank == 1 || rank == 2) && model.input_shape(0) != sequence) {
    return Invalid("model.sequence_length",
                   absl::StrCat(sequence, " disagrees with model.input_shape[0] (",
                                model.input_shape(0),
                                "): a token input holds one position per token"));
  }
  // An embedding of the tokens gives one vector per token (torch.nn.Embedding.forward:
  // the input's shape + (embedding_dim,)), a whole multiple of the sequence. Other
  // embeddings (a class label's) may not, so one that does suffices.
  int first_embedding = -1;
  for (int i = 0; i < model.layers_size(); ++i) {
    const v1::Layer& layer = model.layers(i);
    if (!absl::EqualsIgnoreCase(layer.type(), "Embedding")) continue;
    const int64_t out = layer.output_activations();
    if (out >= sequence && out % sequence == 0) return absl::OkStatus();
    if (first_embedding < 0) first_embedding = i;
  }
  if (first_embedding < 0) return absl::OkStatus();
  return Invalid(
      "model.sequence_length",
      absl::StrCat(sequence, " disagrees with model.layers[", first_embedding,
                   "].output_activations (",
                   model.layers(first_embedding).output_activations(),
                   "): no embedding gives one vector per token of that sequence (a "
                   "multiple of it); describe the model at the sequence it runs"));
}

namespace {

// The model's name, its kinds and its batch size.
absl::Status CheckModelKinds(const v1::ModelDescription& model,
                             const ValidationLimits& limits) {
  if (static_cast<int64_t>(model.name().size()) > limits.max_name_length) {
    return Invalid("model.name", absl::StrCat("longer than ", limits.max_name_length));
  }
  if (!v1::ModelFamily_IsValid(model.family())) {
    return Invalid("model.family", absl::StrCat("unknown value ", model.family()));
  }
  if (!v1::Optimizer_IsValid(model.optimizer())) {
    return Invalid("model.optimizer", absl::StrCat("unknown value ", model.optimizer()));
  }
  if (!v1::DType_IsValid(model.dtype())) {
    return Invalid("model.dtype", absl::StrCat("unknown value ", model.dtype()));
  }
  return CheckField(kModelBatchSize, model.batch_size(), "model.batch_size", limits);
}

// Each dimension of a sample; returns the sample's elements.
absl::StatusOr<double> CheckInputShape(const v1::ModelDescription& model,
                                       const ValidationLimits& limits) {
  // In double: the product of the dimensions is what wraps 64 bits (the layer rules
  // size the input as batch x the sample's elements).
  double sample_elements = 1;
  for (int i = 0; i < model.input_shape_size(); ++i) {
    GPUEST_RETURN_IF_ERROR(CheckItem(kModelInputShape, model.input_shape(i),
                                     "model.input_shape", i, "", limits));
    sample_elements *= static_cast<double>(model.input_shape(i));
  }
  if (sample_elements > static_cast<double>(limits.max_count)) {
    return Invalid("model.input_shape",
                   absl::StrCat("a sample of ", sample_elements,
                                " elements exceeds the limit of ", limits.max_count));
  }
  return sample_elements;
}

// Layer i's type, name, counts, input_op and input_from.
absl::Status CheckLayer(const v1::Layer& layer, int i, const ValidationLimits& limits) {
  // Field paths are built only on failure: this runs for every layer of every call.
  auto field = [i](absl::string_view name) {
    return absl::StrCat("model.layers[", i, "].", name);
  };
  if (layer.type().empty()) return Invalid(field("type"), "is empty");
  if (static_cast<int64_t>(layer.type().size() + layer.name().size()) >
      limits.max_name_length) {
    return Invalid(field("name"), "type or name too long");
  }
  GPUEST_RETURN_IF_ERROR(CheckItem(kLayerOutputActivations, layer.output_activations(),
                                   "model.layers", i, ".output_activations", limits));
  GPUEST_RETURN_IF_ERROR(CheckItem(kLayerParameters, layer.parameters(), "model.layers",
                                   i, ".parameters", limits));
  GPUEST_RETURN_IF_ERROR(CheckItem(kLayerInputActivations, layer.input_activations(),
                                   "model.layers", i, ".input_activations", limits));
  if (static_cast<int64_t>(layer.input_op().size()) > limits.max_name_length) {
    return Invalid(field("input_op"), "too long");
  }
  if (!layer.input_op().empty() &&
      !(layer.has_input_from() && layer.input_from() == -1)) {
    return Invalid(field("input_op"),
                   "names the operation that made an input no module made: it needs "
                   "input_from -1");
  }
  if (layer.has_input_from()) {
    GPUEST_RETURN_IF_ERROR(CheckItem(kLayerInputFrom, int64_t{layer.input_from()},
                                     "model.layers", i, ".input_from", limits));
    if (layer.input_from() >= i) {
      return Invalid(field("input_from"),
                     absl::StrCat(layer.input_from(),
                                  " is not an earlier layer (a layer reads what the "
                                  "layers before it made)"));
    }
  }
  return absl::OkStatus();
}

// The layers' sums over the model.
struct LayerTotals {
  int64_t parameters = 0, output_activations = 0, input_activations = 0;
};

// How many layers, each layer, then their totals.
absl::StatusOr<LayerTotals> CheckLayers(const v1::ModelDescription& model,
                                        const ValidationLimits& limits) {
  if (model.layers_size() == 0) {
    return Invalid("model.layers", "at least one layer is required");
  }
  if (model.layers_size() > limits.max_layers) {
    return Invalid("model.layers",
                   absl::StrCat(model.layers_size(), " layers exceed the limit of ",
                                limits.max_layers));
  }
  // Each at most max_layers x max_count (2^58 by default): no sum wraps.
  LayerTotals totals;
  for (int i = 0; i < model.layers_size(); ++i) {
    const v1::Layer& layer = model.layers(i);
    GPUEST_RETURN_IF_ERROR(CheckLayer(layer, i, limits));
    totals.parameters += layer.parameters();
    totals.output_activations += layer.output_activations();
    totals.input_activations += layer.input_activations();
  }
  GPUEST_RETURN_IF_ERROR(
      CheckCount("model.layers (total parameters)", totals.parameters, limits.max_count));
  GPUEST_RETURN_IF_ERROR(CheckCount("model.layers (total output_activations)",
                                    totals.output_activations, limits.max_count));
  GPUEST_RETURN_IF_ERROR(CheckCount("model.layers (total input_activations)",
                                    totals.input_activations, limits.max_count));
  return totals;
}

// The allocator's max_split_size_mb, as PyTorch takes it.
absl::Status CheckAllocator(const v1::ModelDescription& model,
                            const ValidationLimits& limits) {
  const uint64_t max_split = model.allocator().max_split_size_mb();
  GPUEST_RETURN_IF_ERROR(CheckField(kMaxSplitSizeMb, max_split,
                                    "model.allocator.max_split_size_mb", limits));
  // PyTorch refuses 20 MiB and less.
  if (max_split != 0 && max_split <= 20) {
    return Invalid("model.allocator.max_split_size_mb",
                   absl::StrCat("must be 0 (unlimited) or above 20, got ", max_split));
  }
  return absl::OkStatus();
}

// The trace's caveats: a handful of bounded sentences.
absl::Status CheckTraceCaveats(const v1::ModelDescription& model) {
  if (model.trace_caveats_size() > kMaxTraceCaveats) {
    return Invalid(
        "model.trace_caveats",
        absl::StrCat("at most ", kMaxTraceCaveats, ", got ", model.trace_caveats_size()));
  }
  for (int i = 0; i < model.trace_caveats_size(); ++i) {
    if (model.trace_caveats(i).size() > kMaxTraceCaveatLength) {
      return Invalid(absl::StrCat("model.trace_caveats[", i, "]"),
                     absl::StrCat("longer than ", kMaxTraceCaveatLength, " characters"));
    }
  }
  return absl::OkStatus();
}

// The software stack the description was made on.
absl::Status CheckStack(const v1::SoftwareStack& stack, const ValidationLimits& limits) {
  GPUEST_RETURN_IF_ERROR(CheckField(kStackCudaMajor, uint64_t{stack.cuda_major()},
                                    "model.stack.cuda_major", limits));
  if (const std::string& loading = stack.module_loading();
      !loading.empty() && loading != "LAZY" && loading != "EAGER") {
    return Invalid("model.stack.module_loading",
                   absl::StrCat("must be LAZY or EAGER (CUDA_MODULE_LOADING), got '",
                                loading.substr(0, 32), "'"));
  }
  if (stack.cuda_version().size() > 32) {
    return Invalid("model.stack.cuda_version", "longer than 32 characters");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModel(const v1::ModelDescription& model,
                           const ValidationLimits& limits) {
  GPUEST_RETURN_IF_ERROR(CheckModelKinds(model, limits));
  GPUEST_ASSIGN_OR_RETURN(const double sample_elements, CheckInputShape(model, limits));
  GPUEST_RETURN_IF_ERROR(CheckField(kModelSequenceLength, model.sequence_length(),
                                    "model.sequence_length", limits));
  GPUEST_ASSIGN_OR_RETURN(const LayerTotals totals, CheckLayers(model, limits));
  GPUEST_RETURN_IF_ERROR(CheckStepSize("model.batch_size", model.batch_size(),
                                       totals.output_activations +
                                           totals.input_activations +
                                           static_cast<int64_t>(sample_elements),
                                       totals.parameters));
  if (model.has_trace()) {
    GPUEST_RETURN_IF_ERROR(CheckTrace(model.trace(), limits));
    GPUEST_RETURN_IF_ERROR(requests::CheckTraceBatch(model, model.batch_size()));
  }
  GPUEST_RETURN_IF_ERROR(CheckAllocator(model, limits));
  GPUEST_RETURN_IF_ERROR(CheckTraceCaveats(model));
  GPUEST_RETURN_IF_ERROR(CheckStack(model.stack(), limits));
  if (model.model_source().size() > kMaxModelSourceLength) {
    return Invalid("model.model_source",
                   absl::StrCat("longer than ", kMaxModelSourceLength, " characters"));
  }
  GPUEST_RETURN_IF_ERROR(CheckFieldsAgree(model));
  return ValidateParallelism(model.parallelism());
}

absl::Status ValidateRequest(const v1::EstimateRequest& request,
                             const ValidationLimits& limits) {
  switch (request.input_case()) {
    case v1::EstimateRequest::kModel:
      GPUEST_RETURN_IF_ERROR(ValidateModel(request.model(), limits));
      break;
    case v1::EstimateRequest::kFeatures:
      GPUEST_RETURN_IF_ERROR(CheckFeatures(request.features(), limits));
      break;
    default:
      return Invalid("input", "one of model or features is required");
  }
  if (request.gpu().size() > 64) return Invalid("gpu", "longer than 64 characters");
  absl::flat_hash_map<absl::string_view, int> first_index;
  for (int i = 0; i < request.estimators_size(); ++i) {
    if (request.estimators(i).empty()) {
      return Invalid(absl::StrCat("estimators[", i, "]"), "is empty");
    }
    // Ids are short names; an error that echoed a long one whole could outgrow what a
    // client accepts in a status message.
    if (request.estimators(i).size() > kMaxEstimatorIdLength) {
      return Invalid(absl::StrCat("estimators[", i, "]"),
                     absl::StrCat("longer than ", kMaxEstimatorIdLength, " characters (",
                                  request.estimators(i).size(), ")"));
    }
    // Each id runs once; a repeated one would run again for nothing.
    const auto [it, inserted] = first_index.emplace(request.estimators(i), i);
    if (!inserted) {
      return Invalid(absl::StrCat("estimators[", i, "]"),
                     absl::StrCat("'", request.estimators(i), "' is already estimators[",
                                  it->second, "]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpuest::core
