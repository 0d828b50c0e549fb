#include "estimators/allocsim/layer_trace.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "estimators/core/layer_types.h"

namespace gpuest::allocsim {
namespace {

// A fused attention kernel (flash / memory-efficient, what CUDA runs for
// need_weights=False) saves q, k, v and its output; the output projection saves its
// input, a contiguous copy of that output: five tensors of the layer's output size
// beside the layer's input, and no L x L weights.
constexpr int kFusedAttentionSaved = 5;

// EvoNorm2dS0 / S0a (timm layers/evo_norm.py), x * (x * v).sigmoid() / group_std(x)
// then the affine, keeps four tensors of the output's size for backward: the sigmoid,
// the product, group_std's expand().reshape() copy and the quotient.
constexpr int kEvoNormSaved = 4;

// How far back a layer's input is looked for among earlier outputs (a skip connection's
// source): a ResNet bottleneck's downsample reads the block input 9 layers back; a
// longer reach would take a DenseNet block's concatenation for an older feature map.
constexpr int kSkipLookBack = 16;

// A layer's input this many times the previous layer's output, with a source of the
// input's size among recent outputs, is that source scaled by a per-channel gate (the
// previous output): squeeze-and-excitation over at least a 2 x 2 map.
constexpr uint64_t kGateSpread = 4;

using Saves = core::SavedForBackward;

// Fused attention by its module names: a projection makes q, k and v at once, and
// between it and the output projection the module computes attention functionally,
// which no row shows. timm (timm/layers/attention.py, models/vision_transformer.py
// Attention): `<block>.qkv` and `<block>.proj`; transformers' GPT-2 (GPT2Attention):
// `<block>.c_attn` and `<block>.c_proj`.
constexpr std::pair<absl::string_view, absl::string_view> kFusedAttentionNames[] = {
    {".qkv", ".proj"}, {".c_attn", ".c_proj"}};

// The output projection's suffix where layer is a fused q/k/v projection, else empty.
absl::string_view OutputProjectionOf(const v1::Layer& layer) {
  for (const auto& [fused, output] : kFusedAttentionNames) {
    if (absl::EndsWith(layer.name(), fused)) return output;
  }
  return {};
}

// Whether layer is the output projection of the attention whose fused q/k/v
// projection is qkv: named alike, and reading a third of what qkv made (the attention
// output has one of q, k, v's sizes; where the description gives no inputs, it
// projects back to that size).
bool ProjectsAttentionOf(const v1::Layer& qkv, const v1::Layer& layer) {
  const absl::string_view output = OutputProjectionOf(qkv);
  if (output.empty()) return false;
  const absl::string_view name = qkv.name();
  const absl::string_view block = name.substr(0, name.rfind('.'));
  const int64_t reads = layer.input_activations() > 0 ? layer.input_activations()
                                                      : layer.output_activations();
  return layer.name() == absl::StrCat(block, output) &&
         qkv.output_activations() == 3 * reads;
}

// Hugging Face's decoders (transformers' LlamaAttention and LlamaMLP, which Mistral,
// Qwen2 and others copy) by their module names: q_proj, k_proj and v_proj all read the
// hidden states; between them and o_proj the attention runs functionally (rotary
// embedding, scaled_dot_product_attention); down_proj reads act_fn(gate_proj(x)) *
// up_proj(x), a product no row shows.
constexpr absl::string_view kHfQ = ".q_proj", kHfK = ".k_proj", kHfV = ".v_proj",
                            kHfO = ".o_proj", kHfGate = ".gate_proj", kHfUp = ".up_proj",
                            kHfDown = ".down_proj", kHfAct = ".act_fn";

// Activation checkpointing (torch.utils.checkpoint, Hugging Face's
// gradient_checkpointing_enable) as a layer list shows it: each checkpointed module
// is listed again when backward recomputes its forward, with no parameters the second
// time, after every row of the forward: the list ends in rows that all repeat earlier
// names (a module merely called twice in the forward, as a shared activation is,
// repeats among new rows). In the forward such a region keeps only its input; in
// backward its forward runs again, keeping what it keeps normally until its own
// backward is done.
struct Checkpointing {
  std::vector<bool> repeat;      // A recomputation's row: no step of its own.
  std::vector<int> region;       // The region of a checkpointed row, else -1.
  std::vector<int> first, last;  // Each region's first and last checkpointed row.
};

Checkpointing FindCheckpointing(const v1::ModelDescription& model) {
  const int n = model.layers_size();
  Checkpointing c{std::vector<bool>(n, false), std::vector<int>(n, -1), {}, {}};
  absl::flat_hash_map<absl::string_view, int> first_row;
  std::vector<int> first_of(n, -1);  // A repeated name's first row.
  for (int i = 0; i < n; ++i) {
    const absl::string_view name = model.layers(i).name();
    if (name.empty()) continue;
    const auto [it, fresh] = first_row.emplace(name, i);
    if (!fresh) first_of[i] = it->second;
  }
  int recomputation = n;
  while (recomputation > 0 && first_of[recomputation - 1] >= 0) --recomputation;
  int previous_first = n;
  for (int i = recomputation; i < n; ++i) {
    const int first = first_of[i];
    c.repeat[i] = true;
    // Regions are recomputed last first, each from its start: a step back starts one.
    if (first <= previous_first) {
      c.first.push_back(first);
      c.last.push_back(first);
    }
    previous_first = first;
    const int r = static_cast<int>(c.first.size()) - 1;
    c.region[first] = r;
    c.first[r] = std::min(c.first[r], first);
    c.last[r] = std::max(c.last[r], first);
  }
  return c;
}

// Whether the operation that made a tensor no module made (Layer.input_op) keeps
// nothing for backward: add and sub need neither operand for their gradients, cat and
// stack only the sizes (derivatives.yaml add, sub, cat: grad.narrow by sizes), mean and
// sum only the input's sizes (sum_backward(grad, self.sym_sizes(), ...)).
bool KeepsNothing(absl::string_view op) {
  constexpr absl::string_view kOps[] = {"add",   "iadd",        "radd", "sub",
                                        "isub",  "rsub",        "cat",  "concat",
                                        "stack", "concatenate", "mean", "sum"};
  return std::find(std::begin(kOps), std::end(kOps), op) != std::end(kOps);
}

// Whether child is a module path inside parent's ("stages.0.bn" in "stages.0").
bool IsInside(absl::string_view parent, absl::string_view child) {
  return !parent.empty() && child.size() > parent.size() &&
         absl::StartsWith(child, parent) && child[parent.size()] == '.';
}

// The module tree as the rows list it, parents before their children (the describer's
// forward pre-hooks): each row's parent row (-1: none) and whether rows of its own
// children follow it.
struct ModuleTree {
  std::vector<int> parent;
  std::vector<bool> has_children;
};

ModuleTree TreeOf(const v1::ModelDescription& model) {
  const int n = model.layers_size();
  ModuleTree tree{std::vector<int>(n, -1), std::vector<bool>(n, false)};
  std::vector<int> open;  // The rows whose subtree the listing is in.
  for (int i = 0; i < n; ++i) {
    const absl::string_view name = model.layers(i).name();
    while (!open.empty() && !IsInside(model.layers(open.back()).name(), name)) {
      open.pop_back();
    }
    if (!open.empty()) {
      tree.parent[i] = open.back();
      tree.has_children[open.back()] = true;
    }
    if (!name.empty()) open.push_back(i);
  }
  return tree;
}

// What the rules cannot settle, grouped by type and uncertainty.
class Doubts {
 public:
  void Add(const v1::Layer& layer, v1::Uncertainty why, uint64_t bytes) {
    const auto [it, fresh] = index_.try_emplace(std::pair(layer.type(), why),
                                                static_cast<int>(groups_.size()));
    if (fresh) {
      v1::UncertainLayers& g = groups_.emplace_back();
      g.set_type(layer.type());
      g.set_uncertainty(why);
      g.set_first_name(layer.name());
    }
    v1::UncertainLayers& g = groups_[it->second];
    g.set_count(g.count() + 1);
    g.set_bytes(g.bytes() + bytes);
    total_ += bytes;
  }
  std::vector<v1::UncertainLayers> TakeGroups() { return std::move(groups_); }
  uint64_t total() const { return total_; }

 private:
  absl::flat_hash_map<std::pair<std::string, v1::Uncertainty>, int> index_;
  std::vector<v1::UncertainLayers> groups_;
  uint64_t total_ = 0;
};

// With the describer's sources, an output no later layer reads went only to operations
// between modules. Where the next tensor made between modules is a sum or a
// concatenation, they kept nothing (a residual branch's end); else (a matmul, a
// product: lambda layers' position lambdas, a gate) they may have kept it for backward.
// Outputs `accounted` for elsewhere are left out; a checkpoint's recomputation rows have
// no output.
void DoubtOutputsReadBetweenModules(const v1::ModelDescription& model,
                                    const std::vector<uint64_t>& output_elements,
                                    const std::vector<bool>& accounted,
                                    uint64_t act_bytes, Doubts& doubts) {
  const int n = model.layers_size();
  std::vector<bool> read(n, false);
  for (const v1::Layer& layer : model.layers()) {
    if (!layer.has_input_from()) return;  // No sources: nothing to tell by.
    if (layer.input_from() >= 0) read[layer.input_from()] = true;
  }
  int next_made = n;  // The next row reading a tensor made between modules.
  for (int i = n - 1; i >= 0; --i) {
    const v1::Layer& layer = model.layers(i);
    if (!read[i] && next_made < n && output_elements[i] > 0 && !accounted[i] &&
        !KeepsNothing(model.layers(next_made).input_op())) {
      doubts.Add(layer, v1::UNCERTAINTY_OUTPUT_READ_BETWEEN_MODULES,
                 output_elements[i] * act_bytes);
    }
    if (layer.input_from() == -1) next_made = i;
  }
}

int BytesPerElement(v1::DType dtype) {
  return dtype == v1::DTYPE_FLOAT16 || dtype == v1::DTYPE_BFLOAT16 ? 2 : 4;
}

class TraceBuilder {
 public:
  int Alloc(uint64_t bytes, v1::AllocationCategory category) {
    trace_.add_size_bytes(std::max<uint64_t>(bytes, 1));
    trace_.add_alloc_at(++clock_);
    trace_.add_free_at(0);
    trace_.add_category(category);
    return trace_.size_bytes_size() - 1;
  }
  void Free(int index) {
    if (index >= 0 && trace_.free_at(index) == 0) trace_.set_free_at(index, ++clock_);
  }
  // A tensor freed by the rules that a later layer turns out to read (a skip
  // connection's source) was alive all along: its free is undone.
  void KeepAlive(int index) {
    if (index >= 0) trace_.set_free_at(index, 0);
  }
  uint64_t Size(int index) const { return trace_.size_bytes(index); }
  v1::AllocationTrace Take() { return std::move(trace_); }

 private:
  v1::AllocationTrace trace_;
  uint32_t clock_ = 0;
};

// Whether a layer that saves `saves` keeps its input for backward (a float32 input is
// its own float32 copy).
bool SavesInput(Saves saves, uint64_t act_bytes) {
  return saves == Saves::kInput || saves == Saves::kInputAndStats ||
         saves == Saves::kInputAndIndices || saves == Saves::kFusedAttention ||
         saves == Saves::kInputAndEvoNorm ||
         (saves == Saves::kFloatInputAndNormalized && act_bytes == 4);
}

// The state buffers the optimizer creates per parameter.
int OptimizerBuffers(v1::Optimizer optimizer) {
  switch (optimizer) {
    case v1::OPTIMIZER_SGD:
      return 0;
    case v1::OPTIMIZER_SGD_MOMENTUM:
    case v1::OPTIMIZER_RMSPROP:
    case v1::OPTIMIZER_ADAGRAD:
      return 1;
    default:
      return 2;  // Adam, AdamW, and unspecified (treated as Adam).
  }
}

// One training step built from a model's layers, phase by phase: the parameters and the
// batch, the forward layer by layer, the loss and the backward in reverse, the optimizer
// step, and what the rules cannot settle. Build once.
class StepBuilder {
 public:
  explicit StepBuilder(const v1::ModelDescription& model);
  LayerStep Build();

 private:
  void AllocParametersAndInputs();
  void Forward(int i);
  void ResolveInput(int i, uint64_t input);
  bool ReadsFusedAttention(int i);
  bool ReadsFirstProjectionsInput(int i);
  bool ReadsLlamaAttention(int i);
  bool ReadsGatedProduct(int i);
  bool ReadsNamedSource(int i, uint64_t input);
  void ReadsBySize(int i, uint64_t input);
  void MakeOutput(int i, uint64_t elements, Saves saves);
  void HoldSaved(int i, Saves saves, int output, uint64_t elements);
  int Loss();
  void Backward();
  void OptimizerStep();

  void Keep(int i, int tensor);
  void Hold(int i, int tensor);
  bool Held(int tensor) const;
  bool ParentExplains(int i) const;
  int Sibling(int i, absl::string_view own, absl::string_view other) const;
  void Reads(int tensor, uint64_t tensor_elements);

  const v1::ModelDescription& model_;
  const uint64_t batch_;
  // Activations follow the model's dtype; with mixed precision most are half size.
  const uint64_t act_bytes_;
  const uint64_t param_bytes_;
  const int n_;
  const Checkpointing checkpointing_;
  const ModuleTree tree_;
  TraceBuilder b_;
  Doubts doubts_;
  uint64_t total_params_ = 0;
  uint64_t input_elements_ = 1;
  int batch_input_ = -1;

  // Forward. A layer's output is freed after the next layer ran, unless a layer saved
  // it for backward; saved tensors are freed by their layer's backward, when the last
  // layer holding them is done (a tensor read by two layers, a skip connection's
  // source, is held by both).
  std::vector<std::vector<int>> saved_;
  std::vector<uint64_t> in_bytes_;
  std::vector<int> holders_;  // By trace index: the saved lists holding the tensor.
  std::vector<uint64_t> recomputed_;  // By checkpointed region: what it keeps.
  // Each layer's output tensor and its elements, to find a skip connection's source.
  std::vector<int> outputs_;
  std::vector<uint64_t> output_elements_;
  // Outputs another account covers (DoubtOutputsReadBetweenModules): a parent's is its
  // children's tensor; an unknown leaf's is doubted as such; a named rule keeps its
  // operands.
  std::vector<bool> accounted_;
  std::vector<bool> alias_;  // A view of its input: no tensor, no gradient.
  // The tensor the next layer reads, its bytes and its elements.
  int previous_ = -1;
  uint64_t previous_bytes_ = 0;
  uint64_t previous_elements_ = 0;
  int merging_ = -1;  // A branch's other operand, alive until the branches merge.
  int qkv_ = -1;      // The last fused q/k/v projection whose attention is still open.
  // The tensor each row read, and its elements (-1: none yet).
  std::vector<int> read_;
  std::vector<uint64_t> read_elements_;
  absl::flat_hash_map<absl::string_view, int> row_named_;  // The first row of a name.
};

StepBuilder::StepBuilder(const v1::ModelDescription& model)
    : model_(model),
      batch_(model.batch_size()),
      act_bytes_(model.mixed_precision() ? 2 : BytesPerElement(model.dtype())),
      param_bytes_(BytesPerElement(model.dtype())),
      n_(model.layers_size()),
      checkpointing_(FindCheckpointing(model)),
      tree_(TreeOf(model)),
      saved_(n_),
      in_bytes_(n_),
      recomputed_(checkpointing_.first.size(), 0),
      outputs_(n_, -1),
      output_elements_(n_, 0),
      accounted_(tree_.has_children),
      alias_(n_, false),
      read_(n_, -1),
      read_elements_(n_, 0) {
  for (int i = n_ - 1; i >= 0; --i) row_named_[model.layers(i).name()] = i;
}

LayerStep StepBuilder::Build() {
  AllocParametersAndInputs();
  for (int i = 0; i < n_; ++i) Forward(i);
  if (merging_ >= 0 && !Held(merging_)) b_.Free(merging_);
  Backward();
  OptimizerStep();
  DoubtOutputsReadBetweenModules(model_, output_elements_, accounted_, act_bytes_,
                                 doubts_);
  LayerStep step;
  step.trace = b_.Take();
  step.uncertain_bytes = doubts_.total();
  step.uncertain = doubts_.TakeGroups();
  return step;
}

void StepBuilder::AllocParametersAndInputs() {
  for (const v1::Layer& layer : model_.layers()) {
    if (layer.parameters() > 0)
      b_.Alloc(layer.parameters() * param_bytes_, v1::ALLOCATION_CATEGORY_PARAMETER);
    total_params_ += layer.parameters();
  }
  for (int64_t d : model_.input_shape()) input_elements_ *= d;
  if (model_.input_shape().empty())
    input_elements_ = n_ > 0 ? model_.layers(0).output_activations() : 1;
  // The batch and labels are held by the data loader for the whole step.
  batch_input_ = b_.Alloc(batch_ * input_elements_ * 4, v1::ALLOCATION_CATEGORY_INPUT);
  b_.Alloc(batch_ * 8, v1::ALLOCATION_CATEGORY_INPUT);
  previous_ = batch_input_;
  previous_bytes_ = batch_ * input_elements_ * 4;
  previous_elements_ = batch_ * input_elements_;
}

void StepBuilder::Keep(int i, int tensor) {
  if (static_cast<int>(holders_.size()) <= tensor) holders_.resize(tensor + 1, 0);
  ++holders_[tensor];
  saved_[i].push_back(tensor);
}

// What a layer keeps for backward; in a checkpointed region, counted for the region's
// recomputation instead, and a tensor made only to be kept goes at once.
void StepBuilder::Hold(int i, int tensor) {
  const int r = checkpointing_.region[i];
  if (r < 0) return Keep(i, tensor);
  recomputed_[r] += b_.Size(tensor);
  if (tensor != outputs_[i] && tensor != previous_) b_.Free(tensor);
}

bool StepBuilder::Held(int tensor) const {
  return tensor < static_cast<int>(holders_.size()) && holders_[tensor] > 0;
}

// Whether a known module explains a tensor no module made that row i reads: its
// parent, whose own forward (a known op) made it, as timm's BatchNormAct2d calls
// F.batch_norm and hands the result to its act child.
bool StepBuilder::ParentExplains(int i) const {
  return tree_.parent[i] >= 0 &&
         core::ClassifyLayerType(model_.layers(tree_.parent[i]).type()).kind !=
             core::LayerKind::kUnknown;
}

// The earlier row named as row i's module is, its `own` suffix replaced by `other`.
int StepBuilder::Sibling(int i, absl::string_view own, absl::string_view other) const {
  const absl::string_view name = model_.layers(i).name();
  if (!absl::EndsWith(name, own)) return -1;
  const auto it =
      row_named_.find(absl::StrCat(name.substr(0, name.size() - own.size()), other));
  return it != row_named_.end() && it->second < i && outputs_[it->second] >= 0
             ? it->second
             : -1;
}

// Row i reads `tensor` of `tensor_elements`: the tensor it replaces as the one read
// goes unless something holds it.
void StepBuilder::Reads(int tensor, uint64_t tensor_elements) {
  if (previous_ != batch_input_ && previous_ != tensor && !Held(previous_)) {
    b_.Free(previous_);
  }
  previous_ = tensor;
  previous_bytes_ = b_.Size(tensor);
  previous_elements_ = tensor_elements;
}

void StepBuilder::Forward(int i) {
  const v1::Layer& layer = model_.layers(i);
  if (checkpointing_.repeat[i]) {  // Backward's recomputation: counted at its region.
    alias_[i] = true;
    return;
  }
  if (const int r = checkpointing_.region[i];
      r >= 0 && checkpointing_.first[r] == i && previous_ != batch_input_) {
    Keep(i, previous_);  // checkpoint() keeps the region's input.
  }
  const uint64_t elements = batch_ * static_cast<uint64_t>(layer.output_activations());
  const uint64_t input = batch_ * static_cast<uint64_t>(layer.input_activations());
  ResolveInput(i, input);
  const core::LayerTypeInfo info = core::ClassifyLayerType(layer.type());
  if (info.kind == core::LayerKind::kUnknown && !tree_.has_children[i]) {
    doubts_.Add(layer, v1::UNCERTAINTY_UNKNOWN_TYPE, elements * act_bytes_);
    accounted_[i] = true;
  }
  if (info.kind == core::LayerKind::kShape && elements == previous_elements_ &&
      layer.parameters() == 0) {
    // nn.Identity returns its input and nn.Flatten a view of it (torch.flatten of a
    // contiguous tensor): no tensor of its own, nothing for backward.
    alias_[i] = true;
    outputs_[i] = previous_;
    output_elements_[i] = elements;
    return;
  }
  MakeOutput(i, elements, info.saves);
}

// Settles the tensor row i reads by the first rule that explains it, and doubts a
// tensor made between modules that none explains.
void StepBuilder::ResolveInput(int i, uint64_t input) {
  const v1::Layer& layer = model_.layers(i);
  const bool resolved = ReadsFusedAttention(i) || ReadsFirstProjectionsInput(i) ||
                        ReadsLlamaAttention(i) || ReadsGatedProduct(i);
  if (!resolved && input > 0 && layer.has_input_from() && layer.input_from() == -1 &&
      !ParentExplains(i) && !KeepsNothing(layer.input_op())) {
    doubts_.Add(layer, v1::UNCERTAINTY_MADE_BETWEEN_MODULES, input * act_bytes_);
  }
  if (!OutputProjectionOf(layer).empty()) qkv_ = i;
  if (!resolved && !ReadsNamedSource(i, input) && input > 0 &&
      input != previous_elements_) {
    ReadsBySize(i, input);
  }
}

bool StepBuilder::ReadsFusedAttention(int i) {
  if (qkv_ < 0 || !ProjectsAttentionOf(model_.layers(qkv_), model_.layers(i))) {
    return false;
  }
  const uint64_t heads =
      batch_ * static_cast<uint64_t>(model_.layers(qkv_).output_activations() / 3);
  // The attention between them, as F.scaled_dot_product_attention runs it (timm's
  // fused_attn; derivatives.yaml _scaled_dot_product_efficient_attention and
  // _flash_attention save query, key, value, output and logsumexp): q, k and v are
  // views of the projection's output, which stays until the attention's backward
  // (just before the projection's own), and so does the kernel's output; then
  // x.transpose(1, 2).reshape(B, N, C) copies it into the tensor this layer reads.
  b_.KeepAlive(outputs_[qkv_]);
  accounted_[qkv_] = true;
  if (!Held(outputs_[qkv_])) Hold(qkv_, outputs_[qkv_]);
  Hold(qkv_, b_.Alloc(heads * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION));
  Reads(b_.Alloc(heads * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION), heads);
  qkv_ = -1;
  return true;
}

// A projection beside the first one reads what the first read.
bool StepBuilder::ReadsFirstProjectionsInput(int i) {
  const v1::Layer& layer = model_.layers(i);
  if (layer.has_input_from() && layer.input_from() >= 0) return false;
  int first = Sibling(i, kHfK, kHfQ);
  if (first < 0) first = Sibling(i, kHfV, kHfQ);
  if (first < 0) first = Sibling(i, kHfUp, kHfGate);
  if (first < 0 || read_[first] < 0) return false;
  b_.KeepAlive(read_[first]);
  Reads(read_[first], read_elements_[first]);
  return true;
}

bool StepBuilder::ReadsLlamaAttention(int i) {
  const int q = Sibling(i, kHfO, kHfQ), k = Sibling(i, kHfO, kHfK),
            v = Sibling(i, kHfO, kHfV);
  if (q < 0 || k < 0 || v < 0) return false;
  // The attention as transformers' LlamaAttention runs it (sdpa_attention_forward):
  // apply_rotary_pos_emb makes q and k anew (q * cos + rotate_half(q) * sin; cos
  // and sin need no gradient, so the products keep nothing of q's size), and
  // scaled_dot_product_attention keeps those, v (the projection's output) and its
  // own output; o_proj reads a contiguous copy of that output
  // (attn_output.transpose(1, 2).reshape). With fewer key/value heads, repeat_kv
  // copies k and v to every head first unless SDPA takes them grouped (enable_gqa):
  // the version decides, so those copies are uncertain.
  const uint64_t q_elements = output_elements_[q], k_elements = output_elements_[k];
  b_.KeepAlive(outputs_[v]);
  accounted_[q] = accounted_[k] = accounted_[v] = true;
  if (!Held(outputs_[v])) Hold(i, outputs_[v]);
  for (const uint64_t made : {q_elements, k_elements, q_elements}) {
    Hold(i, b_.Alloc(made * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION));
  }
  for (const int projected : {outputs_[q], outputs_[k]}) {
    if (!Held(projected)) b_.Free(projected);
  }
  if (k_elements < q_elements) {
    doubts_.Add(model_.layers(i), v1::UNCERTAINTY_MADE_BETWEEN_MODULES,
                2 * (q_elements - k_elements) * act_bytes_);
  }
  Reads(b_.Alloc(q_elements * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION),
        q_elements);
  return true;
}

bool StepBuilder::ReadsGatedProduct(int i) {
  const int gate = Sibling(i, kHfDown, kHfGate), up = Sibling(i, kHfDown, kHfUp);
  if (gate < 0 || up < 0) return false;
  // act_fn(gate) * up: torch.mul makes the product down_proj reads and keeps both
  // operands (derivatives.yaml mul: grad * other, grad * self).
  const int act = Sibling(i, kHfDown, kHfAct);
  accounted_[gate] = accounted_[up] = true;
  if (act >= 0) accounted_[act] = true;
  for (const int operand : {act >= 0 ? outputs_[act] : outputs_[gate], outputs_[up]}) {
    b_.KeepAlive(operand);
    if (!Held(operand)) Hold(i, operand);
  }
  Reads(b_.Alloc(output_elements_[up] * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION),
        output_elements_[up]);
  return true;
}

bool StepBuilder::ReadsNamedSource(int i, uint64_t input) {
  const v1::Layer& layer = model_.layers(i);
  if (input == 0 || !layer.has_input_from() || layer.input_from() < 0 ||
      outputs_[layer.input_from()] < 0) {
    return false;
  }
  // The describer says which earlier output it is (Layer.input_from, by storage):
  // no guess by size. Read again, it is alive until then (a RepVGG block's
  // branches, q, k and v reading one norm's output), and the branch that ends in
  // the previous output stays until the branches merge. A tensor no module made
  // (-1) is still placed by size below: a module's own children read tensors it
  // makes inside, which the describer cannot tell from a residual add, and taking
  // each as a new tensor counted them twice (timm_traced within 5 %: CNN 0.607,
  // transformer 0.231, against 0.717 and 0.343 this way).
  const int source = outputs_[layer.input_from()];
  if (source != previous_) {
    b_.KeepAlive(source);
    if (merging_ >= 0 && merging_ != source && !Held(merging_)) b_.Free(merging_);
    merging_ = previous_ != batch_input_ ? previous_ : -1;
    previous_ = source;
  }
  previous_bytes_ = input * act_bytes_;
  previous_elements_ = input;
  return true;
}

// The layer reads something other than the previous layer's output. Where a
// recent layer's output (or the batch) is of its size, it reads that: a skip
// connection (a ResNet block's downsample reads the block's input), which stays
// alive until then, and the previous output stays alive until the branches
// merge (after this layer's successor, as the block's add follows its branch).
// Else an operation between modules made it (a DenseNet block's torch.cat of
// every earlier feature map): a tensor of its own, which the layer keeps for
// backward where it saves its input; the tensor it was made from goes as an
// output does.
void StepBuilder::ReadsBySize(int i, uint64_t input) {
  int source = -1;
  for (int j = i - 2; j >= std::max(0, i - kSkipLookBack) && source < 0; --j) {
    if (output_elements_[j] == input) source = outputs_[j];
  }
  if (source < 0 && input == batch_ * input_elements_) source = batch_input_;
  if (source >= 0 && previous_elements_ < input && input % previous_elements_ == 0 &&
      input / previous_elements_ >= kGateSpread) {
    // The previous layer made a per-channel gate (squeeze-and-excitation: pool,
    // two 1x1 convolutions, a sigmoid), and the layer reads the source times the
    // gate: torch.mul makes a tensor of its own and saves both operands for its
    // backward (derivatives.yaml mul: grad * other, grad * self), so the source
    // stays alive until then (here: this layer's backward, which comes just
    // before), beside the product.
    if (source != batch_input_) {
      b_.KeepAlive(source);
      Hold(i, source);
    }
    const int made = b_.Alloc(input * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION);
    if (previous_ != batch_input_ && !Held(previous_)) b_.Free(previous_);
    previous_ = made;
    previous_bytes_ = input * act_bytes_;
  } else if (source >= 0) {
    if (source != batch_input_) b_.KeepAlive(source);
    if (merging_ >= 0 && !Held(merging_)) b_.Free(merging_);
    merging_ = previous_ != batch_input_ ? previous_ : -1;
    previous_ = source;
    previous_bytes_ = input * act_bytes_;
  } else {
    // Without the describer's sources, the operation that made it is unseen too.
    const v1::Layer& layer = model_.layers(i);
    if (!layer.has_input_from()) {
      doubts_.Add(layer, v1::UNCERTAINTY_MADE_BETWEEN_MODULES, input * act_bytes_);
    }
    const int made = b_.Alloc(input * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION);
    if (previous_ != batch_input_ && !Held(previous_)) b_.Free(previous_);
    previous_ = made;
    previous_bytes_ = input * act_bytes_;
  }
}

// Row i's output, what it keeps for backward, and the tensors it is done with.
void StepBuilder::MakeOutput(int i, uint64_t elements, Saves saves) {
  read_[i] = previous_;
  read_elements_[i] = previous_elements_;
  const int output = b_.Alloc(elements * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION);
  outputs_[i] = output;
  output_elements_[i] = elements;
  in_bytes_[i] = previous_bytes_;
  HoldSaved(i, saves, output, elements);
  if (SavesInput(saves, act_bytes_) && previous_ != batch_input_) Hold(i, previous_);
  if (previous_ != batch_input_ && !Held(previous_)) b_.Free(previous_);
  if (merging_ >= 0 && merging_ != previous_ && i > 0 && outputs_[i - 1] != merging_) {
    // The branch merged after this layer's predecessor's successor: done with it.
    if (!Held(merging_)) b_.Free(merging_);
    merging_ = -1;
  }
  previous_ = output;
  previous_bytes_ = elements * act_bytes_;
  previous_elements_ = elements;
}

// What row i keeps for backward beside its input.
void StepBuilder::HoldSaved(int i, Saves saves, int output, uint64_t elements) {
  switch (saves) {
    case Saves::kInputAndStats:
      Hold(i, b_.Alloc(2 * 4 * 1024, v1::ALLOCATION_CATEGORY_ACTIVATION));
      break;
    case Saves::kInputAndIndices:
      Hold(i, b_.Alloc(elements * 8, v1::ALLOCATION_CATEGORY_ACTIVATION));
      break;
    case Saves::kMask:
      Hold(i, b_.Alloc(elements, v1::ALLOCATION_CATEGORY_ACTIVATION));
      break;
    case Saves::kOutput:
      Hold(i, output);
      break;
    case Saves::kFusedAttention:
      for (int k = 0; k < kFusedAttentionSaved; ++k) {
        Hold(i, b_.Alloc(elements * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION));
      }
      break;
    case Saves::kInputAndEvoNorm:
      for (int k = 0; k < kEvoNormSaved; ++k) {
        Hold(i, b_.Alloc(elements * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION));
      }
      break;
    case Saves::kFloatInputAndNormalized:
      // The normalized tensor the weight's gradient reads; a half input's float32
      // copy, which pow and the product read (a float32 input is itself, below).
      Hold(i, b_.Alloc(elements * act_bytes_, v1::ALLOCATION_CATEGORY_ACTIVATION));
      if (act_bytes_ < 4) {
        Hold(i, b_.Alloc(elements * 4, v1::ALLOCATION_CATEGORY_ACTIVATION));
      }
      break;
    default:
      break;
  }
}

// The loss keeps the logits until backward begins; returns the gradient backward
// starts from.
int StepBuilder::Loss() {
  int grad = -1;
  int lm_head = -1;  // A language model's head (PEFT wraps it: base_model.model.lm_head).
  for (int i = 0; i < n_; ++i) {
    const absl::string_view name = model_.layers(i).name();
    if (name == "lm_head" || absl::EndsWith(name, ".lm_head")) lm_head = i;
  }
  if (lm_head >= 0 && previous_ == outputs_[lm_head]) {
    // A causal language model's loss as transformers computes it (loss_utils.py
    // ForCausalLMLoss): logits.float() (a float32 copy of half logits), then
    // cross_entropy, whose log_softmax keeps its float32 result for backward
    // (derivatives.yaml _log_softmax: result); backward starts from a float32 gradient
    // of that size, cast back to the logits' dtype.
    const uint64_t logits = output_elements_[lm_head] * 4;
    const int copy =
        act_bytes_ < 4 ? b_.Alloc(logits, v1::ALLOCATION_CATEGORY_TEMPORARY) : -1;
    const int log_probs = b_.Alloc(logits, v1::ALLOCATION_CATEGORY_ACTIVATION);
    b_.Free(copy);
    const int float_grad = b_.Alloc(logits, v1::ALLOCATION_CATEGORY_TEMPORARY);
    b_.Free(log_probs);
    grad = b_.Alloc(previous_bytes_, v1::ALLOCATION_CATEGORY_TEMPORARY);
    b_.Free(float_grad);
  } else {
    grad = b_.Alloc(previous_bytes_, v1::ALLOCATION_CATEGORY_TEMPORARY);
  }
  if (!Held(previous_)) b_.Free(previous_);
  return grad;
}

// After the loss, in reverse, each layer's input gradient, its parameters' gradients
// (kept), and its saved tensors go; a checkpointed region's forward runs again
// before its last row's backward and goes after its first row's.
void StepBuilder::Backward() {
  int grad = Loss();
  std::vector<int> recomputation(recomputed_.size(), -1);
  for (int i = n_ - 1; i >= 0; --i) {
    const int r = checkpointing_.region[i];
    if (r >= 0 && checkpointing_.last[r] == i) {
      recomputation[r] = b_.Alloc(recomputed_[r], v1::ALLOCATION_CATEGORY_ACTIVATION);
    }
    if (alias_[i]) {  // Its gradient is its output's.
      if (r >= 0 && checkpointing_.first[r] == i) b_.Free(recomputation[r]);
      continue;
    }
    const v1::Layer& layer = model_.layers(i);
    const int grad_input = b_.Alloc(in_bytes_[i], v1::ALLOCATION_CATEGORY_TEMPORARY);
    if (layer.parameters() > 0) {
      b_.Alloc(layer.parameters() * param_bytes_, v1::ALLOCATION_CATEGORY_GRADIENT);
    }
    b_.Free(grad);
    for (int s : saved_[i]) {
      if (--holders_[s] == 0) b_.Free(s);
    }
    if (r >= 0 && checkpointing_.first[r] == i) b_.Free(recomputation[r]);
    grad = grad_input;
  }
  b_.Free(grad);
}

// Optimizer step: state created on the first step, one multi-tensor temporary, both
// in the parameters' dtype (torch/optim/adam.py _init_group: exp_avg =
// torch.zeros_like(p); sgd.py: momentum_buffer = torch.clone(grad)): a bfloat16
// model's Adam state is half a float32 one's.
void StepBuilder::OptimizerStep() {
  const int buffers = OptimizerBuffers(model_.optimizer());
  if (total_params_ > 0) {
    for (int k = 0; k < buffers; ++k) {
      b_.Alloc(total_params_ * param_bytes_, v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE);
    }
    if (buffers > 0) {
      b_.Free(b_.Alloc(total_params_ * param_bytes_, v1::ALLOCATION_CATEGORY_TEMPORARY));
    }
  }
}

}  // namespace

LayerStep StepFromLayers(const v1::ModelDescription& model) {
  return StepBuilder(model).Build();
}

}  // namespace gpuest::allocsim
