// File: layer_trace.h
//
// An allocation trace of one fp32 training step built from a layer sequence alone, for
// requests that carry no traced step. The rules follow what PyTorch's autograd keeps
// for backward (tools/autograd/derivatives.yaml, torch 2.x); what each layer type
// saves is data, the "saves" of proto/gpuest/v1/layer_types.json (via
// ClassifyLayerType), with where each fact comes from:
// - Linear, Conv*, Embedding, LayerNorm/GroupNorm and GELU/SiLU/Mish/Softplus save their
//   input; ReLU, Tanh, Sigmoid, ELU/SELU, Softmax save their output; BatchNorm saves its
//   input and per-channel statistics; Dropout saves a one-byte mask; max pooling saves
//   its input and int64 indices; adaptive average pooling, flatten and identity keep
//   nothing; attention runs as CUDA's fused kernels do (scaled_dot_product_attention,
//   flash / memory-efficient) and saves its input, q, k, v, its output and the output
//   projection's input, never the L x L weights; EvoNorm2dS0 / S0a save their input
//   and four tensors of their output's size made inside them. A layer's output lives
//   until the last layer that needs it is done with it.
// - Between modules, read from each layer's input_activations: an input of a recent
//   layer's output size is that output (a skip connection: a ResNet block's downsample
//   reads the block input, alive until then, and the main path lives until the
//   branches merge); such an input several times the previous layer's output is that
//   source times a per-channel gate (squeeze-and-excitation: torch.mul makes the
//   product and saves both operands); any other input is a tensor an operation made
//   (a DenseNet block's torch.cat).
// - Identity and Flatten (shape layers of the input's size, no parameters) are views of
//   their input: no tensor, no gradient of their own.
// - Backward, in reverse: the gradient of each layer's output, a temporary of its input
//   size, and each parameter's gradient on first use (kept).
// - The optimizer step creates its state (Adam/AdamW two buffers, SGD with momentum
//   and RMSprop/Adagrad one) and, as torch 2.x's multi-tensor path does, one temporary
//   of the parameters' size.
// Unknown layer types are treated as saving their input (the table's unknown_saves).
//
// What the rules cannot settle is said, layer by layer, with what it may hold beyond
// the built step (v1::Uncertainty): a leaf of a type the table does not know may keep
// its output as well as its input; a tensor no module made, read where no known module
// around it explains it, was made by an operation between modules (a product, an
// attention, a copy) that may keep one tensor of its size, unless the describer names
// that operation a sum, a concatenation or a mean (Layer.input_op), which keep nothing;
// an output no later layer reads may be kept by the operations between modules that
// read it, unless the next tensor they make is such a sum. A sequence the rules fully
// explain has none.
#pragma once

#include <cstdint>
#include <vector>

#include "gpuest/v1/estimate.pb.h"
#include "gpuest/v1/model.pb.h"

namespace gpuest::allocsim {

struct LayerStep {
  v1::AllocationTrace trace;
  // By type and uncertainty, in the order first met.
  std::vector<v1::UncertainLayers> uncertain;
  uint64_t uncertain_bytes = 0;  // Their sum.
};

// The description must be valid (estimators/core/request_validation.h) and have layers.
LayerStep StepFromLayers(const v1::ModelDescription& model);

// The built step's allocations alone.
inline v1::AllocationTrace TraceFromLayers(const v1::ModelDescription& model) {
  return StepFromLayers(model).trace;
}

}  // namespace gpuest::allocsim
