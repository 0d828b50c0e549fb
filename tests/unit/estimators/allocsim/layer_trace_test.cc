#include "estimators/allocsim/layer_trace.h"

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "estimators/allocsim/trace_replay.h"
#include "estimators/core/request_validation.h"
#include "gtest/gtest.h"

namespace gpuest::allocsim {
namespace {

void AddLayer(v1::ModelDescription& m, const char* type, int64_t acts, int64_t params) {
  v1::Layer* l = m.add_layers();
  l->set_type(type);
  l->set_output_activations(acts);
  l->set_parameters(params);
}

// Linear(100 -> 50), ReLU, Dropout, Linear(50 -> 10): 5,560 parameters.
v1::ModelDescription SmallMlp(int64_t batch, v1::Optimizer optimizer) {
  v1::ModelDescription m;
  m.set_batch_size(batch);
  m.add_input_shape(100);
  m.set_optimizer(optimizer);
  AddLayer(m, "Linear", 50, 5050);
  AddLayer(m, "ReLU", 50, 0);
  AddLayer(m, "Dropout", 50, 0);
  AddLayer(m, "Linear", 10, 510);
  return m;
}

std::map<int, uint64_t> BytesByCategory(const v1::AllocationTrace& t, bool alive_at_end) {
  std::map<int, uint64_t> out;
  for (int i = 0; i < t.size_bytes_size(); ++i) {
    if (!alive_at_end || t.free_at(i) == 0) out[t.category(i)] += t.size_bytes(i);
  }
  return out;
}

TEST(LayerTrace, ModelStateInputsAndOptimizerState) {
  const v1::AllocationTrace t = TraceFromLayers(SmallMlp(4, v1::OPTIMIZER_ADAM));
  v1::EstimateRequest request;
  *request.mutable_model() = SmallMlp(4, v1::OPTIMIZER_ADAM);
  *request.mutable_model()->mutable_trace() = t;
  ASSERT_TRUE(core::ValidateRequest(request, core::ValidationLimits{}).ok());

  const auto all = BytesByCategory(t, false);
  EXPECT_EQ(all.at(v1::ALLOCATION_CATEGORY_PARAMETER), 5560u * 4);
  EXPECT_EQ(all.at(v1::ALLOCATION_CATEGORY_GRADIENT), 5560u * 4);
  EXPECT_EQ(all.at(v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE), 2u * 5560 * 4);
  EXPECT_EQ(all.at(v1::ALLOCATION_CATEGORY_INPUT), 4u * 100 * 4 + 4 * 8);
  // What is alive after the step: model state, optimizer state and the batch only.
  const auto end = BytesByCategory(t, true);
  EXPECT_EQ(end.count(v1::ALLOCATION_CATEGORY_ACTIVATION), 0u);
  EXPECT_EQ(end.count(v1::ALLOCATION_CATEGORY_TEMPORARY), 0u);
  EXPECT_EQ(end.at(v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE), 2u * 5560 * 4);
}

TEST(LayerTrace, AttentionSavesWhatTheFusedKernelsSave) {
  // Embedding(1000 -> 64) over 128 tokens, then self-attention: (128 x 64) out.
  v1::ModelDescription m;
  m.set_batch_size(2);
  m.add_input_shape(128);
  AddLayer(m, "Embedding", 128 * 64, 64000);
  AddLayer(m, "MultiheadAttention", 128 * 64, 4 * 64 * 64 + 4 * 64);
  const auto saved = BytesByCategory(TraceFromLayers(m), false);
  const uint64_t tensor = 2u * 128 * 64 * 4;
  // Both layers' outputs, plus q, k, v, the kernel's output and the out-projection's
  // input; a 2 x heads x 128 x 128 weight tensor would be far larger than all of it.
  EXPECT_EQ(saved.at(v1::ALLOCATION_CATEGORY_ACTIVATION), 2 * tensor + 5 * tensor);
}

TEST(LayerTrace, EvoNormKeepsWhatItMakesInside) {
  // Conv2d then a norm of 16 x 32 x 32 at batch 2. GroupNorm makes its output;
  // EvoNorm2dS0a (regnetz_*_evos) also keeps the sigmoid, the product, group_std's
  // full-size copy and the quotient for backward: four tensors more. Without them the
  // layer rule put regnetz_d8_evos at batch 64 at a third of its traced step (12,862
  // against 38,832 MiB simulated from its traced step).
  auto activations = [](const char* norm) {
    v1::ModelDescription m;
    m.set_batch_size(2);
    m.add_input_shape(3);
    m.add_input_shape(32);
    m.add_input_shape(32);
    AddLayer(m, "Conv2d", 16 * 32 * 32, 448);
    AddLayer(m, norm, 16 * 32 * 32, 48);
    return BytesByCategory(TraceFromLayers(m), false)
        .at(v1::ALLOCATION_CATEGORY_ACTIVATION);
  };
  const uint64_t tensor = 2u * 16 * 32 * 32 * 4;
  EXPECT_EQ(activations("EvoNorm2dS0a"), activations("GroupNorm") + 4 * tensor);
  EXPECT_EQ(activations("EvoNorm2dS0"), activations("EvoNorm2dS0a"));
}

TEST(LayerTrace, OptimizerDecidesTheState) {
  const auto sgd =
      BytesByCategory(TraceFromLayers(SmallMlp(4, v1::OPTIMIZER_SGD)), false);
  EXPECT_EQ(sgd.count(v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE), 0u);
  const auto momentum =
      BytesByCategory(TraceFromLayers(SmallMlp(4, v1::OPTIMIZER_SGD_MOMENTUM)), false);
  EXPECT_EQ(momentum.at(v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE), 5560u * 4);
}

// Activation bytes alive when backward starts (the first temporary is the loss
// gradient).
uint64_t LiveActivationsAtBackward(const v1::AllocationTrace& t) {
  uint32_t start = 0;
  for (int i = 0; i < t.size_bytes_size() && start == 0; ++i) {
    if (t.category(i) == v1::ALLOCATION_CATEGORY_TEMPORARY) start = t.alloc_at(i);
  }
  uint64_t live = 0;
  for (int i = 0; i < t.size_bytes_size(); ++i) {
    if (t.category(i) == v1::ALLOCATION_CATEGORY_ACTIVATION && t.alloc_at(i) < start &&
        (t.free_at(i) == 0 || t.free_at(i) > start)) {
      live += t.size_bytes(i);
    }
  }
  return live;
}

TEST(LayerTrace, SavedActivationsFollowTheRules) {
  // Per sample: ReLU's output (50 floats, saved by ReLU), Dropout's mask (50 bytes),
  // Dropout's output (saved by the last Linear as its input), and the logits (10
  // floats, held by the loss). The first Linear's output is freed: ReLU saves its
  // output, not its input. The batch itself is input, not activation.
  for (int64_t batch : {1, 64, 1000}) {
    EXPECT_EQ(
        LiveActivationsAtBackward(TraceFromLayers(SmallMlp(batch, v1::OPTIMIZER_ADAM))),
        static_cast<uint64_t>(batch) * (200 + 50 + 200 + 40))
        << "batch " << batch;
  }
}

TEST(LayerTrace, OptimizerStateIsInTheParametersDtype) {
  // torch.optim's state is zeros_like(p) (Adam) or a clone of the gradient (SGD
  // momentum): a bfloat16 model's state is 2 bytes a parameter, not 4.
  for (const auto& [dtype, bytes] :
       {std::pair{v1::DTYPE_FLOAT32, 4u}, std::pair{v1::DTYPE_BFLOAT16, 2u}}) {
    v1::ModelDescription m = SmallMlp(4, v1::OPTIMIZER_ADAMW);
    m.set_dtype(dtype);
    const auto all = BytesByCategory(TraceFromLayers(m), false);
    EXPECT_EQ(all.at(v1::ALLOCATION_CATEGORY_OPTIMIZER_STATE), 2u * 5560 * bytes);
    EXPECT_EQ(all.at(v1::ALLOCATION_CATEGORY_GRADIENT), 5560u * bytes);
  }
}

TEST(LayerTrace, HuggingFacesRmsNormKeepsAFloatInputAndTheNormalizedTensor) {
  // Linear(64 -> 64), a norm, Linear(64 -> 64), 16 tokens. LlamaRMSNorm computes in
  // Python: its backward reads the input in float32 (a copy when the model is half;
  // the half input itself is then not kept) and the normalized tensor, 4 bytes an
  // element more than torch.nn.RMSNorm's input either way.
  auto saved = [](const char* norm, v1::DType dtype) {
    v1::ModelDescription m;
    m.set_batch_size(2);
    m.add_input_shape(16);
    m.add_input_shape(64);
    m.set_dtype(dtype);
    AddLayer(m, "Linear", 16 * 64, 64 * 65);
    AddLayer(m, norm, 16 * 64, 64);
    AddLayer(m, "Linear", 16 * 64, 64 * 65);
    return LiveActivationsAtBackward(TraceFromLayers(m));
  };
  const uint64_t elements = 2u * 16 * 64;
  for (v1::DType dtype : {v1::DTYPE_FLOAT32, v1::DTYPE_BFLOAT16}) {
    EXPECT_EQ(saved("LlamaRMSNorm", dtype), saved("RMSNorm", dtype) + 4 * elements)
        << dtype;
    EXPECT_EQ(saved("Qwen2RMSNorm", dtype), saved("LlamaRMSNorm", dtype)) << dtype;
  }
}

TEST(LayerTrace, TimmsFusedQkvAttentionKeepsWhatTheKernelSaves) {
  // A ViT block's attention as timm writes it: norm1, attn.qkv (C -> 3C), then the
  // attention computed functionally, then attn.proj (C -> C); 16 tokens of 32.
  auto saved = [](const char* qkv_name) {
    v1::ModelDescription m;
    m.set_batch_size(2);
    m.add_input_shape(16);
    m.add_input_shape(32);
    auto add = [&](const char* type, int64_t in, int64_t out, int64_t params,
                   const char* name) {
      AddLayer(m, type, out, params);
      m.mutable_layers(m.layers_size() - 1)->set_input_activations(in);
      m.mutable_layers(m.layers_size() - 1)->set_name(name);
    };
    add("LayerNorm", 16 * 32, 16 * 32, 64, "blocks.0.norm1");
    add("Linear", 16 * 32, 16 * 96, 32 * 96 + 96, qkv_name);
    add("Linear", 16 * 32, 16 * 32, 32 * 32 + 32, "blocks.0.attn.proj");
    return LiveActivationsAtBackward(TraceFromLayers(m));
  };
  const uint64_t tensor = 2u * 16 * 32 * 4;
  // norm1's output (qkv's input), q, k and v (the projection's output, 3 tensors'
  // worth), the kernel's output, the reshaped copy proj reads, and the logits.
  EXPECT_EQ(saved("blocks.0.attn.qkv"), 7 * tensor);
  // Not named as timm's fused projection: proj is taken to read norm1's output again
  // (a skip), and nothing of an attention is seen.
  EXPECT_EQ(saved("blocks.0.attn.fused"), 2 * tensor);
}

TEST(LayerTrace, AClampingActivationKeepsItsInputAReluItsOutput) {
  // Conv2d, BatchNorm2d, an activation, Conv2d over 8 x 16 x 16. relu's backward reads
  // its result, hardtanh's (ReLU6) and elu's their input (derivatives.yaml; only their
  // in-place forms read the result, and a layer list does not say which ran): with
  // ReLU6 the norm's output stays beside the activation's, a tensor more than ReLU.
  auto saved = [](const char* act) {
    v1::ModelDescription m;
    m.set_batch_size(2);
    m.add_input_shape(3);
    m.add_input_shape(16);
    m.add_input_shape(16);
    AddLayer(m, "Conv2d", 8 * 16 * 16, 224);
    AddLayer(m, "BatchNorm2d", 8 * 16 * 16, 16);
    AddLayer(m, act, 8 * 16 * 16, 0);
    AddLayer(m, "Conv2d", 8 * 16 * 16, 584);
    return LiveActivationsAtBackward(TraceFromLayers(m));
  };
  const uint64_t tensor = 2u * 8 * 16 * 16 * 4;
  EXPECT_EQ(saved("ReLU6"), saved("ReLU") + tensor);
  EXPECT_EQ(saved("ELU"), saved("ReLU6"));
  EXPECT_EQ(saved("Hardtanh"), saved("ReLU6"));
}

TEST(LayerTrace, TheDescribersInputSourcesSettleWhatSizesCannot) {
  // A RepVGG block on x (the previous block's ReLU output): conv_1x1 and its norm,
  // conv_kxk and its norm, both convolutions reading x, the sum of the branches made
  // between modules, then ReLU; 8 x 16 x 16 throughout. By size, conv_kxk seems to read
  // the 1x1 branch's norm output (the previous output, of x's size) and keeps it; by
  // the describer's sources it reads x again, which both convolutions keep once.
  auto saved = [](bool sources) {
    v1::ModelDescription m;
    m.set_batch_size(2);
    m.add_input_shape(8);
    m.add_input_shape(16);
    m.add_input_shape(16);
    const int64_t c = 8 * 16 * 16;
    auto add = [&](const char* type, int64_t params, int from) {
      AddLayer(m, type, c, params);
      v1::Layer* l = m.mutable_layers(m.layers_size() - 1);
      l->set_input_activations(c);
      if (sources) l->set_input_from(from);
    };
    add("Conv2d", 584, -2);     // 0: x, from the batch
    add("ReLU", 0, 0);          // 1
    add("Conv2d", 72, 1);       // 2: conv_1x1
    add("BatchNorm2d", 16, 2);  // 3
    add("Conv2d", 584, 1);      // 4: conv_kxk reads x again
    add("BatchNorm2d", 16, 4);  // 5
    add("ReLU", 0, -1);         // 6: the branches' sum
    return LiveActivationsAtBackward(TraceFromLayers(m));
  };
  const uint64_t tensor = 2u * 8 * 16 * 16 * 4;
  const uint64_t norm_statistics = 2 * (2 * 4 * 1024);  // Mean and invstd, per norm.
  // Kept: x (ReLU's output, both convolutions' input), each convolution's output (its
  // norm's input), the last ReLU's output (the logits here).
  EXPECT_EQ(saved(true), 4 * tensor + norm_statistics);
  EXPECT_EQ(saved(false), saved(true) + tensor);
}

// Two blocks of Linear(64 -> 256), GELU, Linear(256 -> 64) over 16 tokens, then a
// head; with checkpointing each block's rows are listed again, last block first, as
// backward recomputes them (no parameters the second time).
v1::ModelDescription TwoBlocks(bool checkpointed, bool shared_act_called_twice = false) {
  v1::ModelDescription m;
  m.set_batch_size(2);
  m.add_input_shape(16);
  m.add_input_shape(64);
  auto add = [&](const char* type, int64_t acts, int64_t params,
                 const std::string& name) {
    AddLayer(m, type, acts, params);
    m.mutable_layers(m.layers_size() - 1)->set_name(name);
  };
  auto block = [&](int k, bool again) {
    const std::string b = "blocks." + std::to_string(k);
    add("Linear", 16 * 256, again ? 0 : 64 * 256 + 256, b + ".fc1");
    add("GELU", 16 * 256, 0, shared_act_called_twice ? "act" : b + ".act");
    add("Linear", 16 * 64, again ? 0 : 256 * 64 + 64, b + ".fc2");
  };
  block(0, false);
  block(1, false);
  add("Linear", 10, 64 * 10 + 10, "head");
  if (checkpointed) {
    block(1, true);
    block(0, true);
  }
  return m;
}

TEST(LayerTrace, CheckpointedBlocksKeepTheirInputsAndRecomputeInBackward) {
  const uint64_t wide = 2u * 16 * 256 * 4, narrow = 2u * 16 * 64 * 4;
  // Without checkpointing, backward starts with each block's fc2 input and GELU input
  // (2 wide tensors a block), block 1's fc1 input, the head's input and the logits.
  const v1::AllocationTrace plain = TraceFromLayers(TwoBlocks(false));
  EXPECT_EQ(LiveActivationsAtBackward(plain), 4 * wide + 2 * narrow + 2u * 10 * 4);
  // Checkpointed, only the blocks' inputs stay (block 0's is the batch, not counted),
  // beside the head's input and the logits;
  const v1::AllocationTrace ckpt = TraceFromLayers(TwoBlocks(true));
  EXPECT_EQ(LiveActivationsAtBackward(ckpt), 2 * narrow + 2u * 10 * 4);
  // the recomputed rows are no steps of their own (the same parameters, gradients and
  // optimizer state as without),
  EXPECT_EQ(BytesByCategory(ckpt, false).at(v1::ALLOCATION_CATEGORY_GRADIENT),
            BytesByCategory(plain, false).at(v1::ALLOCATION_CATEGORY_GRADIENT));
  // and in backward each block's activations come back, one block at a time: the
  // most ever alive is less than without, more than the inputs alone.
  auto peak = [](const v1::AllocationTrace& t) {
    std::map<uint32_t, int64_t> delta;
    for (int i = 0; i < t.size_bytes_size(); ++i) {
      if (t.category(i) != v1::ALLOCATION_CATEGORY_ACTIVATION) continue;
      delta[t.alloc_at(i)] += static_cast<int64_t>(t.size_bytes(i));
      if (t.free_at(i) > 0) delta[t.free_at(i)] -= static_cast<int64_t>(t.size_bytes(i));
    }
    int64_t live = 0, most = 0;
    for (const auto& [tick, d] : delta) most = std::max(most, live += d);
    return most;
  };
  EXPECT_LT(peak(ckpt), peak(plain));
  EXPECT_GE(peak(ckpt), static_cast<int64_t>(2 * wide));
  // A module merely called twice in the forward (a shared activation) is no
  // recomputation: the rows after it are new.
  EXPECT_EQ(LiveActivationsAtBackward(TraceFromLayers(TwoBlocks(false, true))),
            LiveActivationsAtBackward(plain));
}

TEST(LayerTrace, AnIdentityOrFlattenIsAViewOfItsInput) {
  // Linear, ReLU (saves its output), Identity, Flatten, Linear (saves its input: the
  // ReLU's output itself, through the two views): at backward, the ReLU's output and
  // the logits, no copies; the views take no gradient of their own.
  v1::ModelDescription m = SmallMlp(8, v1::OPTIMIZER_SGD);
  m.mutable_layers()->DeleteSubrange(2, 2);
  AddLayer(m, "Identity", 50, 0);
  AddLayer(m, "Flatten", 50, 0);
  AddLayer(m, "Linear", 10, 510);
  const v1::AllocationTrace t = TraceFromLayers(m);
  EXPECT_EQ(LiveActivationsAtBackward(t), 8u * 4 * (50 + 10));
  // The temporaries: the loss gradient and one input gradient per non-view layer.
  int temporaries = 0;
  for (int i = 0; i < t.size_bytes_size(); ++i) {
    temporaries += t.category(i) == v1::ALLOCATION_CATEGORY_TEMPORARY;
  }
  EXPECT_EQ(temporaries, 1 + 3);
}

// A dense block as its layer list shows it: Conv2d(16 -> 8) and Tanh, then a second
// Conv2d whose input is the torch.cat of the block input and the first conv's output
// (24 channels, 8 x 8): a tensor no module made. Per sample, in floats.
v1::ModelDescription DenseBlock(bool with_inputs) {
  v1::ModelDescription m;
  m.set_batch_size(2);
  m.set_optimizer(v1::OPTIMIZER_SGD);
  for (int64_t d : {16, 8, 8}) m.add_input_shape(d);
  AddLayer(m, "Conv2d", 8 * 64, 16 * 8 * 9 + 8);
  AddLayer(m, "Tanh", 8 * 64, 0);
  AddLayer(m, "Conv2d", 8 * 64, 24 * 8 * 9 + 8);
  if (with_inputs) {
    m.mutable_layers(0)->set_input_activations(16 * 64);
    m.mutable_layers(1)->set_input_activations(8 * 64);
    m.mutable_layers(2)->set_input_activations(24 * 64);
  }
  return m;
}

TEST(LayerTrace, AnInputNoModuleMadeIsCountedAndKept) {
  // Without inputs, the second conv keeps Tanh's output (kept anyway: Tanh saves it).
  // With them, it keeps the 24-channel concatenation too, until its backward, and its
  // input gradient is of the concatenation's size.
  const uint64_t without = LiveActivationsAtBackward(TraceFromLayers(DenseBlock(false)));
  const uint64_t with = LiveActivationsAtBackward(TraceFromLayers(DenseBlock(true)));
  EXPECT_EQ(without, 2u * 4 * (8 * 64 + 8 * 64));  // Tanh's output, the logits.
  EXPECT_EQ(with, without + 2u * 4 * 24 * 64);
  // Inputs that are the previous layer's outputs change nothing.
  v1::ModelDescription plain = SmallMlp(8, v1::OPTIMIZER_ADAM);
  const int64_t inputs[] = {100, 50, 50, 50};
  for (int i = 0; i < plain.layers_size(); ++i) {
    plain.mutable_layers(i)->set_input_activations(inputs[i]);
  }
  EXPECT_EQ(TraceFromLayers(plain).SerializeAsString(),
            TraceFromLayers(SmallMlp(8, v1::OPTIMIZER_ADAM)).SerializeAsString());
}

// A block with a skip connection as its layer list shows it: Conv2d and ReLU make the
// block input X (512 floats per sample), the main path pools and normalises it (256),
// then a downsample Conv2d reads X again (its input_activations are X's, not the
// previous layer's), BatchNorm2d and ReLU after the add.
v1::ModelDescription SkipBlock() {
  v1::ModelDescription m;
  m.set_batch_size(2);
  m.set_optimizer(v1::OPTIMIZER_SGD);
  for (int64_t d : {16, 8, 8}) m.add_input_shape(d);
  const struct {
    const char* type;
    int64_t in, out, params;
  } layers[] = {{"Conv2d", 1024, 512, 16 * 8 * 9 + 8},
                {"ReLU", 512, 512, 0},
                {"AdaptiveAvgPool2d", 512, 256, 0},
                {"BatchNorm2d", 256, 256, 32},
                {"Conv2d", 512, 256, 8 * 16 + 16},
                {"BatchNorm2d", 256, 256, 32},
                {"ReLU", 256, 256, 0}};
  for (const auto& l : layers) {
    AddLayer(m, l.type, l.out, l.params);
    m.mutable_layers(m.layers_size() - 1)->set_input_activations(l.in);
  }
  return m;
}

TEST(LayerTrace, ASkipConnectionReadsItsSourceAndKeepsItAlive) {
  const v1::AllocationTrace t = TraceFromLayers(SkipBlock());
  // The activations of X's size: the conv's output and X itself, no tensor made for
  // the downsample's input (it reads X: a skip connection, not an operation's output).
  std::vector<int> x_sized, quarter;
  for (int i = 0; i < t.size_bytes_size(); ++i) {
    if (t.category(i) != v1::ALLOCATION_CATEGORY_ACTIVATION) continue;
    if (t.size_bytes(i) == 2u * 512 * 4) x_sized.push_back(i);
    if (t.size_bytes(i) == 2u * 256 * 4) quarter.push_back(i);
  }
  ASSERT_EQ(x_sized.size(), 2u);
  ASSERT_EQ(quarter.size(), 5u);  // The outputs of layers 2 to 6.
  const int x = x_sized[1];
  // X outlives the pooling (which saves nothing) until the downsample's backward: alive
  // when backward starts.
  uint32_t backward = 0;
  for (int i = 0; i < t.size_bytes_size() && backward == 0; ++i) {
    if (t.category(i) == v1::ALLOCATION_CATEGORY_TEMPORARY) backward = t.alloc_at(i);
  }
  EXPECT_TRUE(t.free_at(x) == 0 || t.free_at(x) > backward) << t.free_at(x);
  // The main path's output (layer 3's) lives through the branch (layers 4 and 5) until
  // the add, and goes before the last ReLU's output is made.
  const int main_path = quarter[1];
  EXPECT_GT(t.free_at(main_path), t.alloc_at(quarter[3]));
  EXPECT_LT(t.free_at(main_path), t.alloc_at(quarter[4]));
}

// Squeeze-and-excitation as its layer list shows it: Conv2d and SiLU make X (8
// channels, 4 x 4), pooling and two 1x1 convolutions with a Sigmoid make a per-channel
// gate (8), and the next Conv2d reads X times the gate (torch.mul between modules).
TEST(LayerTrace, ASqueezeExcitationGateMakesAProductAndKeepsItsSource) {
  v1::ModelDescription m;
  m.set_batch_size(2);
  m.set_optimizer(v1::OPTIMIZER_SGD);
  for (int64_t d : {4, 4, 4}) m.add_input_shape(d);
  const struct {
    const char* type;
    int64_t in, out, params;
  } layers[] = {{"Conv2d", 64, 128, 4 * 8 * 9 + 8},
                {"SiLU", 128, 128, 0},
                {"AdaptiveAvgPool2d", 128, 8, 0},
                {"Conv2d", 8, 2, 18},
                {"SiLU", 2, 2, 0},
                {"Conv2d", 2, 8, 24},
                {"Sigmoid", 8, 8, 0},
                {"Conv2d", 128, 64, 8 * 4 + 4}};
  for (const auto& l : layers) {
    AddLayer(m, l.type, l.out, l.params);
    m.mutable_layers(m.layers_size() - 1)->set_input_activations(l.in);
  }
  const v1::AllocationTrace t = TraceFromLayers(m);
  std::vector<int> x_sized;
  uint32_t backward = 0;
  for (int i = 0; i < t.size_bytes_size(); ++i) {
    if (t.category(i) == v1::ALLOCATION_CATEGORY_TEMPORARY && backward == 0) {
      backward = t.alloc_at(i);
    }
    if (t.category(i) == v1::ALLOCATION_CATEGORY_ACTIVATION &&
        t.size_bytes(i) == 2u * 128 * 4) {
      x_sized.push_back(i);
    }
  }
  // The conv's output, X, and the product: mul saves X, the last conv the product.
  ASSERT_EQ(x_sized.size(), 3u);
  for (int k : {1, 2}) {
    const int i = x_sized[k];
    EXPECT_TRUE(t.free_at(i) == 0 || t.free_at(i) > backward) << k;
  }
}

// A block as a describer lists it: a parent row of `parent_type` and its children
// (parents before children), 64 features per sample throughout.
v1::ModelDescription NamedBlock(const char* parent_type, const char* leaf_type,
                                int leaf_input_from) {
  v1::ModelDescription m;
  m.set_batch_size(4);
  m.add_input_shape(64);
  auto add = [&](const char* type, int64_t params, const char* name, int from) {
    AddLayer(m, type, 64, params);
    v1::Layer* l = m.mutable_layers(m.layers_size() - 1);
    l->set_name(name);
    l->set_input_activations(64);
    l->set_input_from(from);
  };
  add("Linear", 64 * 64 + 64, "stem", -2);  // 0
  add(parent_type, 128, "block", 0);        // 1: its own work, then its children
  add("Identity", 0, "block.drop", -1);     // 2: reads what the parent made
  add(leaf_type, 0, "block.act", leaf_input_from);
  add("Linear", 64 * 10 + 10, "head", 3);
  return m;
}

TEST(LayerTrace, ASequenceTheRulesExplainHasNoUncertainLayers) {
  const LayerStep step = StepFromLayers(NamedBlock("BatchNormAct2d", "SiLU", 2));
  EXPECT_TRUE(step.uncertain.empty());
  EXPECT_EQ(step.uncertain_bytes, 0u);
  EXPECT_TRUE(StepFromLayers(SmallMlp(4, v1::OPTIMIZER_ADAM)).uncertain.empty());
}

TEST(LayerTrace, ALeafOfAnUnknownTypeMayKeepItsOutput) {
  // An unknown leaf is taken to keep its input (unknown_saves); it may keep its
  // output too: one tensor of its output's size. An unknown parent whose children are
  // listed is not a leaf: its children show its work.
  const LayerStep step = StepFromLayers(NamedBlock("BatchNormAct2d", "MysteryAct", 2));
  ASSERT_EQ(step.uncertain.size(), 1u);
  const v1::UncertainLayers& g = step.uncertain[0];
  EXPECT_EQ(g.type(), "MysteryAct");
  EXPECT_EQ(g.uncertainty(), v1::UNCERTAINTY_UNKNOWN_TYPE);
  EXPECT_EQ(g.count(), 1);
  EXPECT_EQ(g.first_name(), "block.act");
  EXPECT_EQ(g.bytes(), 4u * 64 * 4);
  EXPECT_EQ(step.uncertain_bytes, g.bytes());
}

TEST(LayerTrace, ATensorMadeBetweenModulesIsUncertainWhereNoKnownModuleMadeIt) {
  // Under BatchNormAct2d, whose own forward is F.batch_norm, the tensor its drop child
  // reads is that op's output: explained. Under a parent of unknown type the op that
  // made it is unseen, and may keep a tensor of its size.
  const LayerStep known = StepFromLayers(NamedBlock("BatchNormAct2d", "SiLU", 2));
  EXPECT_TRUE(known.uncertain.empty());
  const LayerStep unknown = StepFromLayers(NamedBlock("MysteryBlock", "SiLU", 2));
  ASSERT_EQ(unknown.uncertain.size(), 1u);
  EXPECT_EQ(unknown.uncertain[0].type(), "Identity");
  EXPECT_EQ(unknown.uncertain[0].uncertainty(), v1::UNCERTAINTY_MADE_BETWEEN_MODULES);
  EXPECT_EQ(unknown.uncertain[0].bytes(), 4u * 64 * 4);
  // The describer's word on the operation settles it where the operation keeps
  // nothing (a sum, a concatenation), and leaves it uncertain where it may (a product).
  for (const char* op : {"add", "iadd", "cat", "mean"}) {
    v1::ModelDescription m = NamedBlock("MysteryBlock", "SiLU", 2);
    m.mutable_layers(2)->set_input_op(op);
    EXPECT_TRUE(StepFromLayers(m).uncertain.empty()) << op;
  }
  v1::ModelDescription product = NamedBlock("MysteryBlock", "SiLU", 2);
  product.mutable_layers(2)->set_input_op("mul");
  EXPECT_EQ(StepFromLayers(product).uncertain_bytes, 4u * 64 * 4);
}

TEST(LayerTrace, WithoutSourcesATensorMadeBetweenModulesIsUncertain) {
  // DenseBlock's second conv reads a concatenation no layer made: counted as a tensor
  // of its own, and uncertain, for the operation that made it is unseen.
  const LayerStep with = StepFromLayers(DenseBlock(true));
  ASSERT_EQ(with.uncertain.size(), 1u);
  EXPECT_EQ(with.uncertain[0].uncertainty(), v1::UNCERTAINTY_MADE_BETWEEN_MODULES);
  EXPECT_EQ(with.uncertain_bytes, 2u * 4 * 24 * 64);
}

TEST(LayerTrace, TimmsAttentionBetweenItsProjectionsIsExplained) {
  // The attention between `<block>.qkv` and `<block>.proj` is modelled (fused kernel):
  // proj reading the attention's output is no uncertain layer.
  v1::ModelDescription m;
  m.set_batch_size(2);
  m.add_input_shape(16);
  m.add_input_shape(64);
  auto add = [&](const char* type, int64_t in, int64_t out, int64_t params,
                 const char* name, int from) {
    AddLayer(m, type, out, params);
    v1::Layer* l = m.mutable_layers(m.layers_size() - 1);
    l->set_name(name);
    l->set_input_activations(in);
    l->set_input_from(from);
  };
  add("Linear", 16 * 64, 16 * 192, 64 * 192 + 192, "blocks.0.attn.qkv", -2);
  add("Linear", 16 * 64, 16 * 64, 64 * 64 + 64, "blocks.0.attn.proj", -1);
  EXPECT_TRUE(StepFromLayers(m).uncertain.empty());
}

// A Hugging Face decoder block's rows as a describer without inputs lists them: a
// norm, then `prefix`'s projections (64 features per token, 16 tokens); with
// `named` false the same rows under names no rule reads.
v1::ModelDescription DecoderRows(bool named, bool mlp) {
  v1::ModelDescription m;
  m.set_batch_size(2);
  m.add_input_shape(16);
  m.add_input_shape(64);
  auto add = [&](const char* type, int64_t features, int64_t params, const char* name) {
    AddLayer(m, type, 16 * features, params);
    m.mutable_layers(m.layers_size() - 1)
        ->set_name(named ? name : absl::StrCat("x.", m.layers_size()));
  };
  add("LayerNorm", 64, 128, "model.layers.0.norm");
  if (mlp) {
    add("Linear", 176, 64 * 176, "model.layers.0.mlp.gate_proj");
    add("SiLU", 176, 0, "model.layers.0.mlp.act_fn");
    add("Linear", 176, 64 * 176, "model.layers.0.mlp.up_proj");
    add("Linear", 64, 176 * 64, "model.layers.0.mlp.down_proj");
  } else {  // Grouped-query attention: k and v of half q's width.
    add("Linear", 64, 64 * 64, "model.layers.0.self_attn.q_proj");
    add("Linear", 32, 64 * 32, "model.layers.0.self_attn.k_proj");
    add("Linear", 32, 64 * 32, "model.layers.0.self_attn.v_proj");
    add("Linear", 64, 64 * 64, "model.layers.0.self_attn.o_proj");
  }
  return m;
}

TEST(LayerTrace, HuggingFacesGatedMlpKeepsBothOperandsAndTheProduct) {
  // By names, up_proj reads the norm's output as gate_proj does, and down_proj reads
  // act_fn(gate) * up, a product torch.mul makes, keeping both operands. Without them
  // up_proj seems to read act_fn's output (which it keeps, as the product does) and
  // down_proj up_proj's: the product itself is missing.
  const uint64_t token = 2u * 16 * 4;  // Bytes per feature over the batch's tokens.
  EXPECT_EQ(
      LiveActivationsAtBackward(TraceFromLayers(DecoderRows(true, true))),
      LiveActivationsAtBackward(TraceFromLayers(DecoderRows(false, true))) + 176 * token);
}

TEST(LayerTrace, HuggingFacesAttentionKeepsWhatRotaryAndSdpaMake) {
  // By names: k_proj and v_proj read the norm's output; the attention keeps rotary q
  // (64) and k (32), v (32) and its output (64); o_proj reads a copy (64). Without
  // names: k_proj keeps q's output (64), v_proj k's (32), o_proj v's (32).
  const uint64_t token = 2u * 16 * 4;
  const LayerStep named = StepFromLayers(DecoderRows(true, false));
  EXPECT_EQ(LiveActivationsAtBackward(named.trace),
            LiveActivationsAtBackward(TraceFromLayers(DecoderRows(false, false))) +
                (32 + 64 + 32 + 64 + 64 - 64 - 32 - 32) * token);
  // repeat_kv's copies of k and v to every head are version-dependent: uncertain.
  ASSERT_EQ(named.uncertain.size(), 1u);
  EXPECT_EQ(named.uncertain[0].first_name(), "model.layers.0.self_attn.o_proj");
  EXPECT_EQ(named.uncertain_bytes, 2 * (64 - 32) * token);
}

TEST(LayerTrace, ALanguageModelsLossKeepsFloat32LogProbabilities) {
  // transformers' ForCausalLMLoss: a float32 copy of half logits, log_softmax's float32
  // result kept for backward, and a float32 gradient of their size.
  auto bytes = [](const char* head, v1::DType dtype) {
    v1::ModelDescription m = SmallMlp(4, v1::OPTIMIZER_SGD);
    m.set_dtype(dtype);
    m.mutable_layers(3)->set_name(head);
    return BytesByCategory(TraceFromLayers(m), false);
  };
  const uint64_t logits = 4u * 10 * 4;  // Batch 4, 10 outputs, float32.
  for (const v1::DType dtype : {v1::DTYPE_FLOAT32, v1::DTYPE_BFLOAT16}) {
    const auto lm = bytes("lm_head", dtype), plain = bytes("head", dtype);
    EXPECT_EQ(lm.at(v1::ALLOCATION_CATEGORY_ACTIVATION),
              plain.at(v1::ALLOCATION_CATEGORY_ACTIVATION) + logits);
    EXPECT_EQ(lm.at(v1::ALLOCATION_CATEGORY_TEMPORARY),
              plain.at(v1::ALLOCATION_CATEGORY_TEMPORARY) +
                  (dtype == v1::DTYPE_BFLOAT16 ? 2 : 1) * logits);
  }
}

TEST(LayerTrace, GptTwosFusedAttentionIsReadByItsNamesWithoutInputs) {
  // transformers' GPT2Attention: c_attn makes q, k and v at once, c_proj reads the
  // merged heads. Without inputs, by names: c_attn's output stays for the attention,
  // which keeps its output (64), and c_proj reads a copy (64); under other names
  // c_proj seems to read c_attn's output itself.
  auto live = [](bool named) {
    v1::ModelDescription m;
    m.set_batch_size(2);
    m.add_input_shape(16);
    m.add_input_shape(64);
    const char* names[] = {"h.0.ln_1", "h.0.attn.c_attn", "h.0.attn.c_proj"};
    const char* types[] = {"LayerNorm", "Conv1D", "Conv1D"};
    const int64_t features[] = {64, 192, 64};
    for (int k = 0; k < 3; ++k) {
      AddLayer(m, types[k], 16 * features[k], 64 * features[k]);
      m.mutable_layers(k)->set_name(named ? names[k] : absl::StrCat("x", k));
    }
    return LiveActivationsAtBackward(TraceFromLayers(m));
  };
  EXPECT_EQ(live(true), live(false) + 2u * 16 * 4 * (64 + 64));
}

TEST(LayerTrace, OutputsReadOnlyBetweenModulesAreUncertainUnlessSummed) {
  // a and b read the stem's output; c reads what an operation between modules made of
  // a's and b's outputs, which no row reads. A matmul keeps both for backward (its
  // gradients read the other operand), a sum keeps neither.
  auto step = [](const char* op) {
    v1::ModelDescription m;
    m.set_batch_size(4);
    m.add_input_shape(16);
    const struct {
      const char* name;
      int64_t out;
      int from;
    } rows[] = {{"stem", 16, -2}, {"blk.a", 32, 0}, {"blk.b", 32, 0}, {"blk.c", 8, -1}};
    for (const auto& r : rows) {
      AddLayer(m, "Linear", r.out, 16 * r.out);
      v1::Layer* l = m.mutable_layers(m.layers_size() - 1);
      l->set_name(r.name);
      l->set_input_activations(r.from == -1 ? 32 : 16);
      l->set_input_from(r.from);
    }
    m.mutable_layers(3)->set_input_op(op);
    return StepFromLayers(m);
  };
  const LayerStep matmul = step("matmul");
  uint64_t read_between = 0;
  for (const v1::UncertainLayers& g : matmul.uncertain) {
    if (g.uncertainty() == v1::UNCERTAINTY_OUTPUT_READ_BETWEEN_MODULES) {
      EXPECT_EQ(g.count(), 2);
      EXPECT_EQ(g.first_name(), "blk.b");  // Found from the end.
      read_between = g.bytes();
    }
  }
  EXPECT_EQ(read_between, 2u * 4 * 32 * 4);
  EXPECT_TRUE(step("add").uncertain.empty());
}

}  // namespace
}  // namespace gpuest::allocsim
