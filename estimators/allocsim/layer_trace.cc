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

}  // namespace

LayerStep StepFromLayers(const v1::ModelDescription& model) {
  const uint64_t batch = model.batch_size();
  // Activations follow the model's dtype; with mixed precision most are half size.
  const uint64_t act_bytes = model.mixed_precision() ? 2 : BytesPerElement(model.dtype());
  const uint64_t param_bytes = BytesPerElement(model.dtype());
  const int n = model.layers_size();
  TraceBuilder b;

  uint64_t total_params = 0;
  for (const v1::Layer& layer : model.layers()) {
    if (layer.parameters() > 0)
      b.Alloc(layer.parameters() * param_bytes, v1::ALLOCATION_CATEGORY_PARAMETER);
    total_params += layer.parameters();
  }
  uint64_t input_elements = 1;
  for (int64_t d : model.input_shape()) input_elements *= d;
  if (model.input_shape().empty())
    input_elements = n > 0 ? model.layers(0).output_activations() : 1;
  // The batch and labels are held by the data loader for the whole step.
  const int batch_input =
      b.Alloc(batch * input_elements * 4, v1::ALLOCATION_CATEGORY_INPUT);
  b.Alloc(batch * 8, v1::ALLOCATION_CATEGORY_INPUT);

  // Forward. A layer's output is freed after the next layer ran, unless a layer saved
  // it for backward; saved tensors are freed by their layer's backward, when the last
  // layer holding them is done (a tensor read by two layers, a skip connection's
  // source, is held by both).
  std::vector<std::vector<int>> saved(n);
  std::vector<uint64_t> in_bytes(n);
  std::vector<int> holders;  // By trace index: the saved lists holding the tensor.
  auto keep = [&](int i, int tensor) {
    if (static_cast<int>(holders.size()) <= tensor) holders.resize(tensor + 1, 0);
    ++holders[tensor];
    saved[i].push_back(tensor);
  };
  const Checkpointing checkpointing = FindCheckpointing(model);
  const ModuleTree tree = TreeOf(model);
  Doubts doubts;
  // Whether a known module explains a tensor no module made that row i reads: its
  // parent, whose own forward (a known op) made it, as timm's BatchNormAct2d calls
  // F.batch_norm and hands the result to its act child.
  auto parent_explains = [&](int i) {
    return tree.parent[i] >= 0 &&
           core::ClassifyLayerType(model.layers(tree.parent[i]).type()).kind !=
               core::LayerKind::kUnknown;
  };
  std::vector<uint64_t> recomputed(checkpointing.first.size(), 0);
  // Each layer's output tensor (and, below, its elements), to find a skip
  // connection's source; the tensor the next layer reads.
  std::vector<int> outputs(n, -1);
  int previous = batch_input;
  // What a layer keeps for backward; in a checkpointed region, counted for the
  // region's recomputation instead, and a tensor made only to be kept goes at once.
  auto hold = [&](int i, int tensor) {
    const int r = checkpointing.region[i];
    if (r < 0) return keep(i, tensor);
    recomputed[r] += b.Size(tensor);
    if (tensor != outputs[i] && tensor != previous) b.Free(tensor);
  };
  auto held = [&](int tensor) {
    return tensor < static_cast<int>(holders.size()) && holders[tensor] > 0;
  };
  std::vector<uint64_t> output_elements(n, 0);
  // Outputs another account covers (DoubtOutputsReadBetweenModules): a parent's is its
  // children's tensor; an unknown leaf's is doubted as such; a named rule keeps its
  // operands.
  std::vector<bool> accounted = tree.has_children;
  std::vector<bool> alias(n, false);  // A view of its input: no tensor, no gradient.
  uint64_t previous_bytes = batch * input_elements * 4;
  uint64_t previous_elements = batch * input_elements;
  int merging = -1;  // A branch's other operand, alive until the branches merge.
  int qkv = -1;      // The last fused q/k/v projection whose attention is still open.
  // The tensor each row read, and its elements (-1: none yet).
  std::vector<int> read(n, -1);
  std::vector<uint64_t> read_elements(n, 0);
  absl::flat_hash_map<absl::string_view, int> row_named;  // The first row of a name.
  for (int i = n - 1; i >= 0; --i) row_named[model.layers(i).name()] = i;
  // The earlier row named as row i's module is, its `own` suffix replaced by `other`.
  auto sibling = [&](int i, absl::string_view own, absl::string_view other) {
    const absl::string_view name = model.layers(i).name();
    if (!absl::EndsWith(name, own)) return -1;
    const auto it =
        row_named.find(absl::StrCat(name.substr(0, name.size() - own.size()), other));
    return it != row_named.end() && it->second < i && outputs[it->second] >= 0
               ? it->second
               : -1;
  };
  // Row i reads `tensor` of `tensor_elements`: the tensor it replaces as the one read
  // goes unless something holds it.
  auto reads = [&](int tensor, uint64_t tensor_elements) {
    if (previous != batch_input && previous != tensor && !held(previous)) {
      b.Free(previous);
    }
    previous = tensor;
    previous_bytes = b.Size(tensor);
    previous_elements = tensor_elements;
  };
  for (int i = 0; i < n; ++i) {
    const v1::Layer& layer = model.layers(i);
    if (checkpointing.repeat[i]) {  // Backward's recomputation: counted at its region.
      alias[i] = true;
      continue;
    }
    if (const int r = checkpointing.region[i];
        r >= 0 && checkpointing.first[r] == i && previous != batch_input) {
      keep(i, previous);  // checkpoint() keeps the region's input.
    }
    const uint64_t elements = batch * static_cast<uint64_t>(layer.output_activations());
    const uint64_t input = batch * static_cast<uint64_t>(layer.input_activations());
    bool resolved = false;  // Whether the tensor this layer reads is settled.
    if (qkv >= 0 && ProjectsAttentionOf(model.layers(qkv), layer)) {
      const uint64_t heads =
          batch * static_cast<uint64_t>(model.layers(qkv).output_activations() / 3);
      // The attention between them, as F.scaled_dot_product_attention runs it (timm's
      // fused_attn; derivatives.yaml _scaled_dot_product_efficient_attention and
      // _flash_attention save query, key, value, output and logsumexp): q, k and v are
      // views of the projection's output, which stays until the attention's backward
      // (just before the projection's own), and so does the kernel's output; then
      // x.transpose(1, 2).reshape(B, N, C) copies it into the tensor this layer reads.
      b.KeepAlive(outputs[qkv]);
      accounted[qkv] = true;
      if (!held(outputs[qkv])) hold(qkv, outputs[qkv]);
      hold(qkv, b.Alloc(heads * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION));
      reads(b.Alloc(heads * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION), heads);
      qkv = -1;
      resolved = true;
    }
    if (!resolved && !(layer.has_input_from() && layer.input_from() >= 0)) {
      // A projection beside the first one reads what the first read.
      int first = sibling(i, kHfK, kHfQ);
      if (first < 0) first = sibling(i, kHfV, kHfQ);
      if (first < 0) first = sibling(i, kHfUp, kHfGate);
      if (first >= 0 && read[first] >= 0) {
        b.KeepAlive(read[first]);
        reads(read[first], read_elements[first]);
        resolved = true;
      }
    }
    if (const int q = sibling(i, kHfO, kHfQ), k = sibling(i, kHfO, kHfK),
        v = sibling(i, kHfO, kHfV);
        !resolved && q >= 0 && k >= 0 && v >= 0) {
      // The attention as transformers' LlamaAttention runs it (sdpa_attention_forward):
      // apply_rotary_pos_emb makes q and k anew (q * cos + rotate_half(q) * sin; cos
      // and sin need no gradient, so the products keep nothing of q's size), and
      // scaled_dot_product_attention keeps those, v (the projection's output) and its
      // own output; o_proj reads a contiguous copy of that output
      // (attn_output.transpose(1, 2).reshape). With fewer key/value heads, repeat_kv
      // copies k and v to every head first unless SDPA takes them grouped (enable_gqa):
      // the version decides, so those copies are uncertain.
      const uint64_t q_elements = output_elements[q], k_elements = output_elements[k];
      b.KeepAlive(outputs[v]);
      accounted[q] = accounted[k] = accounted[v] = true;
      if (!held(outputs[v])) hold(i, outputs[v]);
      for (const uint64_t made : {q_elements, k_elements, q_elements}) {
        hold(i, b.Alloc(made * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION));
      }
      for (const int projected : {outputs[q], outputs[k]}) {
        if (!held(projected)) b.Free(projected);
      }
      if (k_elements < q_elements) {
        doubts.Add(layer, v1::UNCERTAINTY_MADE_BETWEEN_MODULES,
                   2 * (q_elements - k_elements) * act_bytes);
      }
      reads(b.Alloc(q_elements * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION),
            q_elements);
      resolved = true;
    }
    if (const int gate = sibling(i, kHfDown, kHfGate), up = sibling(i, kHfDown, kHfUp);
        !resolved && gate >= 0 && up >= 0) {
      // act_fn(gate) * up: torch.mul makes the product down_proj reads and keeps both
      // operands (derivatives.yaml mul: grad * other, grad * self).
      const int act = sibling(i, kHfDown, kHfAct);
      accounted[gate] = accounted[up] = true;
      if (act >= 0) accounted[act] = true;
      for (const int operand : {act >= 0 ? outputs[act] : outputs[gate], outputs[up]}) {
        b.KeepAlive(operand);
        if (!held(operand)) hold(i, operand);
      }
      reads(b.Alloc(output_elements[up] * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION),
            output_elements[up]);
      resolved = true;
    }
    if (!resolved && input > 0 && layer.has_input_from() && layer.input_from() == -1 &&
        !parent_explains(i) && !KeepsNothing(layer.input_op())) {
      doubts.Add(layer, v1::UNCERTAINTY_MADE_BETWEEN_MODULES, input * act_bytes);
    }
    if (!OutputProjectionOf(layer).empty()) qkv = i;
    if (!resolved && input > 0 && layer.has_input_from() && layer.input_from() >= 0 &&
        outputs[layer.input_from()] >= 0) {
      // The describer says which earlier output it is (Layer.input_from, by storage):
      // no guess by size. Read again, it is alive until then (a RepVGG block's
      // branches, q, k and v reading one norm's output), and the branch that ends in
      // the previous output stays until the branches merge. A tensor no module made
      // (-1) is still placed by size below: a module's own children read tensors it
      // makes inside, which the describer cannot tell from a residual add, and taking
      // each as a new tensor counted them twice (timm_traced within 5 %: CNN 0.607,
      // transformer 0.231, against 0.717 and 0.343 this way).
      const int source = outputs[layer.input_from()];
      if (source != previous) {
        b.KeepAlive(source);
        if (merging >= 0 && merging != source && !held(merging)) b.Free(merging);
        merging = previous != batch_input ? previous : -1;
        previous = source;
      }
      previous_bytes = input * act_bytes;
      previous_elements = input;
      resolved = true;
    }
    if (!resolved && input > 0 && input != previous_elements) {
      // The layer reads something other than the previous layer's output. Where a
      // recent layer's output (or the batch) is of its size, it reads that: a skip
      // connection (a ResNet block's downsample reads the block's input), which stays
      // alive until then, and the previous output stays alive until the branches
      // merge (after this layer's successor, as the block's add follows its branch).
      // Else an operation between modules made it (a DenseNet block's torch.cat of
      // every earlier feature map): a tensor of its own, which the layer keeps for
      // backward where it saves its input; the tensor it was made from goes as an
      // output does.
      int source = -1;
      for (int j = i - 2; j >= std::max(0, i - kSkipLookBack) && source < 0; --j) {
        if (output_elements[j] == input) source = outputs[j];
      }
      if (source < 0 && input == batch * input_elements) source = batch_input;
      if (source >= 0 && previous_elements < input && input % previous_elements == 0 &&
          input / previous_elements >= kGateSpread) {
        // The previous layer made a per-channel gate (squeeze-and-excitation: pool,
        // two 1x1 convolutions, a sigmoid), and the layer reads the source times the
        // gate: torch.mul makes a tensor of its own and saves both operands for its
        // backward (derivatives.yaml mul: grad * other, grad * self), so the source
        // stays alive until then (here: this layer's backward, which comes just
        // before), beside the product.
        if (source != batch_input) {
          b.KeepAlive(source);
          hold(i, source);
        }
        const int made = b.Alloc(input * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION);
        if (previous != batch_input && !held(previous)) b.Free(previous);
        previous = made;
        previous_bytes = input * act_bytes;
      } else if (source >= 0) {
        if (source != batch_input) b.KeepAlive(source);
        if (merging >= 0 && !held(merging)) b.Free(merging);
        merging = previous != batch_input ? previous : -1;
        previous = source;
        previous_bytes = input * act_bytes;
      } else {
        // Without the describer's sources, the operation that made it is unseen too.
        if (!layer.has_input_from()) {
          doubts.Add(layer, v1::UNCERTAINTY_MADE_BETWEEN_MODULES, input * act_bytes);
        }
        const int made = b.Alloc(input * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION);
        if (previous != batch_input && !held(previous)) b.Free(previous);
        previous = made;
        previous_bytes = input * act_bytes;
      }
    }
    const core::LayerTypeInfo info = core::ClassifyLayerType(layer.type());
    if (info.kind == core::LayerKind::kUnknown && !tree.has_children[i]) {
      doubts.Add(layer, v1::UNCERTAINTY_UNKNOWN_TYPE, elements * act_bytes);
      accounted[i] = true;
    }
    if (info.kind == core::LayerKind::kShape && elements == previous_elements &&
        layer.parameters() == 0) {
      // nn.Identity returns its input and nn.Flatten a view of it (torch.flatten of a
      // contiguous tensor): no tensor of its own, nothing for backward.
      alias[i] = true;
      outputs[i] = previous;
      output_elements[i] = elements;
      continue;
    }
    read[i] = previous;
    read_elements[i] = previous_elements;
    const int output = b.Alloc(elements * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION);
    outputs[i] = output;
    output_elements[i] = elements;
    in_bytes[i] = previous_bytes;
    const Saves saves = info.saves;
    switch (saves) {
      case Saves::kInputAndStats:
        hold(i, b.Alloc(2 * 4 * 1024, v1::ALLOCATION_CATEGORY_ACTIVATION));
        break;
      case Saves::kInputAndIndices:
        hold(i, b.Alloc(elements * 8, v1::ALLOCATION_CATEGORY_ACTIVATION));
        break;
      case Saves::kMask:
        hold(i, b.Alloc(elements, v1::ALLOCATION_CATEGORY_ACTIVATION));
        break;
      case Saves::kOutput:
        hold(i, output);
        break;
      case Saves::kFusedAttention:
        for (int k = 0; k < kFusedAttentionSaved; ++k) {
          hold(i, b.Alloc(elements * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION));
        }
        break;
      case Saves::kInputAndEvoNorm:
        for (int k = 0; k < kEvoNormSaved; ++k) {
          hold(i, b.Alloc(elements * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION));
        }
        break;
      case Saves::kFloatInputAndNormalized:
        // The normalized tensor the weight's gradient reads; a half input's float32
        // copy, which pow and the product read (a float32 input is itself, below).
        hold(i, b.Alloc(elements * act_bytes, v1::ALLOCATION_CATEGORY_ACTIVATION));
        if (act_bytes < 4) {
          hold(i, b.Alloc(elements * 4, v1::ALLOCATION_CATEGORY_ACTIVATION));
        }
        break;
      default:
        break;
    }
    const bool saves_input = saves == Saves::kInput || saves == Saves::kInputAndStats ||
                             saves == Saves::kInputAndIndices ||
                             saves == Saves::kFusedAttention ||
                             saves == Saves::kInputAndEvoNorm ||
                             (saves == Saves::kFloatInputAndNormalized && act_bytes == 4);
    if (saves_input && previous != batch_input) hold(i, previous);
    if (previous != batch_input && !held(previous)) b.Free(previous);
    if (merging >= 0 && merging != previous && i > 0 && outputs[i - 1] != merging) {
      // The branch merged after this layer's predecessor's successor: done with it.
      if (!held(merging)) b.Free(merging);
      merging = -1;
    }
    previous = output;
    previous_bytes = elements * act_bytes;
    previous_elements = elements;
  }
  if (merging >= 0 && !held(merging)) b.Free(merging);

  // The loss keeps the logits until backward begins; then, in reverse, each layer's
  // input gradient, its parameters' gradients (kept), and its saved tensors go.
  int grad = -1;
  int lm_head = -1;  // A language model's head (PEFT wraps it: base_model.model.lm_head).
  for (int i = 0; i < n; ++i) {
    const absl::string_view name = model.layers(i).name();
    if (name == "lm_head" || absl::EndsWith(name, ".lm_head")) lm_head = i;
  }
  if (lm_head >= 0 && previous == outputs[lm_head]) {
    // A causal language model's loss as transformers computes it (loss_utils.py
    // ForCausalLMLoss): logits.float() (a float32 copy of half logits), then
    // cross_entropy, whose log_softmax keeps its float32 result for backward
    // (derivatives.yaml _log_softmax: result); backward starts from a float32 gradient
    // of that size, cast back to the logits' dtype.
    const uint64_t logits = output_elements[lm_head] * 4;
    const int copy =
        act_bytes < 4 ? b.Alloc(logits, v1::ALLOCATION_CATEGORY_TEMPORARY) : -1;
    const int log_probs = b.Alloc(logits, v1::ALLOCATION_CATEGORY_ACTIVATION);
    b.Free(copy);
    const int float_grad = b.Alloc(logits, v1::ALLOCATION_CATEGORY_TEMPORARY);
    b.Free(log_probs);
    grad = b.Alloc(previous_bytes, v1::ALLOCATION_CATEGORY_TEMPORARY);
    b.Free(float_grad);
  } else {
    grad = b.Alloc(previous_bytes, v1::ALLOCATION_CATEGORY_TEMPORARY);
  }
  if (!held(previous)) b.Free(previous);
  std::vector<int> recomputation(recomputed.size(), -1);
  for (int i = n - 1; i >= 0; --i) {
    const int r = checkpointing.region[i];
    if (r >= 0 && checkpointing.last[r] == i) {
      recomputation[r] = b.Alloc(recomputed[r], v1::ALLOCATION_CATEGORY_ACTIVATION);
    }
    if (alias[i]) {  // Its gradient is its output's.
      if (r >= 0 && checkpointing.first[r] == i) b.Free(recomputation[r]);
      continue;
    }
    const v1::Layer& layer = model.layers(i);
    const int grad_input = b.Alloc(in_bytes[i], v1::ALLOCATION_CATEGORY_TEMPORARY);
    if (layer.parameters() > 0) {
      b.Alloc(layer.parameters() * param_bytes, v1::ALLOCATION_CATEGORY_GRADIENT);
    }
    b.Free(grad);
    for (int s : saved[i]) {
      if (--holders[s] == 0) b.Free(s);
    }
    if (r >= 0 && checkpointing.first[r] == i) b.Free(recomputation[r]);
    grad = grad_input;
  }
  b.Free(grad);

  // Optimizer step: state created on the first step, one multi-tensor temporary, both
  // in the parameters' dtype (torch/optim/adam.py _init_group: exp_avg =
  // torch.zeros_like(p); sgd.py: momentum_buffer = torch.clone(grad)): a bfloat16
  // model's Adam state is half a float32 one's.
  int buffers = 2;
  switch (model.optimizer()) {
    case v1::OPTIMIZER_SGD:
      buffers = 0;
      break;
    case v1::OPTIMIZER_SGD_MOMENTUM:
    case v1::OPTIMIZER_RMSPROP:
    case v1::OPTIMIZER_ADAGRAD:
      buffers = 1;
      break;
    default:
      break;  // Adam, AdamW, and unspecified (treated as Adam).
  }
  if (total_params > 0) {
    for (int k = 0; k < buffers; ++k) {
      b.Alloc(total_params * param_bytes, v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE);
    }
    if (buffers > 0) {
      b.Free(b.Alloc(total_params * param_bytes, v1::ALLOCATION_CATEGORY_TEMPORARY));
    }
  }
  DoubtOutputsReadBetweenModules(model, output_elements, accounted, act_bytes, doubts);
  LayerStep step;
  step.trace = b.Take();
  step.uncertain_bytes = doubts.total();
  step.uncertain = doubts.TakeGroups();
  return step;
}

}  // namespace gpuest::allocsim
