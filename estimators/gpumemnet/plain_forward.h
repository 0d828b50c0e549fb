// File: plain_forward.h
//
// A GPUMemNet network's forward on the CPU as plain arrays, without libtorch's per-op
// overhead (a few microseconds each, which dominated the ensembles' latency): the same
// arithmetic as the modules of networks.h in eval mode (dropout off). Torch-free; the
// served estimator fills these from its modules with ExportPlainNet
// (plain_export.h), which checks them against the modules' forward at load.
#pragma once

#include <vector>

#include "estimators/gpumemnet/feature_encoding.h"

namespace gpuest::gpumemnet {

// y = x W^T + b, then ReLU when relu.
struct DenseLayer {
  int in = 0, out = 0;
  std::vector<float> weight_t;  // [in][out]: the weight transposed, for axpy loops.
  std::vector<float> bias;
  bool relu = false;
};
using DenseNet = std::vector<DenseLayer>;

// One nn::TransformerEncoderLayer of libtorch 1.13 (post-norm:
// x = norm1(x + attention(x)); x = norm2(x + linear2(relu(linear1(x)))), attention
// with q scaled by 1/sqrt(head size)).
struct EncoderLayer {
  int heads = 0, feedforward = 0;
  DenseLayer in_proj, out_proj, linear1, linear2;
  std::vector<float> norm1_w, norm1_b, norm2_w, norm2_b;
};

// A whole member. MLP-based (d == 0): the trunk and heads on the global features.
// Transformer-based: the token encoder (embedding plus the projection of the two
// numbers, then the encoder layers), mean-pooled and concatenated with the global
// features, then the trunk and heads.
struct PlainNet {
  int d = 0;
  std::vector<float> embedding;  // [vocabulary][d]
  DenseLayer projection;         // 2 -> d
  std::vector<EncoderLayer> layers;
  DenseNet trunk;  // Trunk and heads, on [pooled tokens, global features].
};

// The code the forward runs, from the least to the most the CPU must have: the
// portable build of the source, AVX2 with FMA, AVX-512 (16 floats a vector). Checked
// at run time: the build assumes only x86-64. They agree to float rounding.
enum class ForwardKernels { kPortable, kAvx2Fma, kAvx512 };
// Those this CPU runs, in that order; the best is the last.
std::vector<ForwardKernels> SupportedForwardKernels();
ForwardKernels BestForwardKernels();

// A request's tokens as the Transformer-based nets see them: a set. Nothing in the
// network tells positions apart (no positional encoding; one request has no padding
// mask), so tokens with the same type and numbers have the same value after every
// layer. Each distinct one (bit for bit) is kept once with how often it occurs, and is
// computed once, weighed by its count in attention's sums and in the mean pool: the
// same arithmetic in another order. Real models repeat their blocks (cnn.json's 67
// layers are 43 distinct tokens, transformer.json's 34 are 8), and attention's cost
// goes with the square of the tokens. Made once per request, read by every member.
struct TokenSet {
  std::vector<int64_t> types;  // Per distinct token; must index the embedding.
  std::vector<float> numbers;  // Two per distinct token.
  std::vector<float> counts;   // How often each occurs.
  size_t occurrences = 0;      // The sequence's length: the sum of counts.
};
TokenSet DistinctTokens(const EncodedSequence& seq);

// Every head's logits, one after another. tokens are read only by Transformer-based
// nets. Kernels the CPU lacks are replaced by the best it has. Scratch buffers are kept
// per thread.
std::vector<float> PlainForward(const PlainNet& net, const std::vector<float>& global,
                                const TokenSet& tokens,
                                ForwardKernels kernels = BestForwardKernels());
// The same on a sequence, for callers with one member.
std::vector<float> PlainForward(const PlainNet& net, const std::vector<float>& global,
                                const EncodedSequence& seq,
                                ForwardKernels kernels = BestForwardKernels());

}  // namespace gpuest::gpumemnet
