#include "estimators/gpumemnet/plain_forward.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

namespace gpuest::gpumemnet {
namespace {

// Every helper is inlined into the entry points at the bottom, so that the same
// source is compiled for the baseline x86-64 (SSE2), for AVX2 with FMA and for
// AVX-512; which one runs is chosen at run time (no -march: the binary runs on any
// x86-64). L is the lanes of a vector: 8, or 16 for AVX-512, whose registers hold 16
// floats (on CPUs with whole 512-bit units, such as AMD's Zen 5, twice the work per
// instruction).
#define GPUEST_INLINE inline __attribute__((always_inline))

// L floats (and L int32) in the compiler's generic vectors. Only ever locals inside
// the inlined helpers (never passed between functions, whose ABI would differ between
// the builds).
template <int L>
struct Lanes {
  typedef float F __attribute__((vector_size(4 * L)));
  typedef int32_t I __attribute__((vector_size(4 * L)));
};

#define GPUEST_LOAD(v, p) __builtin_memcpy(&(v), (p), sizeof(v))
#define GPUEST_STORE(p, v) __builtin_memcpy((p), &(v), sizeof(v))

template <int L>
int Padded(int n) {
  return (n + L - 1) / L * L;
}

// y[R rows][C vectors of columns from o on] = x W^T + b, for as many such column blocks
// as fit; returns the first column left. Every weight vector loaded serves R rows and
// every input broadcast C vectors, and the R * C accumulators are independent chains,
// so the FMA units are kept busy even on one row (a single chain waits on each FMA).
template <int L, int R, int C>
GPUEST_INLINE int DenseColumns(const DenseLayer& layer, const float* x, float* y, int o) {
  using V = typename Lanes<L>::F;
  const int in = layer.in, out = layer.out;
  const float* w = layer.weight_t.data();
  for (; o + C * L <= out; o += C * L) {
    V acc[R][C];
    for (int c = 0; c < C; ++c) {
      V bias;
      GPUEST_LOAD(bias, layer.bias.data() + o + c * L);
      for (int k = 0; k < R; ++k) acc[k][c] = bias;
    }
    for (int i = 0; i < in; ++i) {
      const float* wi = w + static_cast<size_t>(i) * out + o;
      float xi[R];
      for (int k = 0; k < R; ++k) xi[k] = x[static_cast<size_t>(k) * in + i];
      // Each weight vector used as soon as it is loaded (a loop of loads into an
      // array of vectors becomes a copy through the stack).
      for (int c = 0; c < C; ++c) {
        V wv;
        GPUEST_LOAD(wv, wi + c * L);
        for (int k = 0; k < R; ++k) acc[k][c] += xi[k] * wv;
      }
    }
    for (int k = 0; k < R; ++k) {
      for (int c = 0; c < C; ++c) {
        // NaN stays NaN, as in libtorch's relu: the caller must see it.
        if (layer.relu) acc[k][c] = acc[k][c] < 0.0f ? 0.0f : acc[k][c];
        GPUEST_STORE(y + static_cast<size_t>(k) * out + o + c * L, acc[k][c]);
      }
    }
  }
  return o;
}

// The columns from o on, past the last whole vector, one at a time: four partial sums
// per column, again so that the FMAs do not wait on each other.
template <int R>
GPUEST_INLINE void DenseTailColumns(const DenseLayer& layer, const float* x, float* y,
                                    int o) {
  const int in = layer.in, out = layer.out;
  const float* w = layer.weight_t.data();
  for (; o < out; ++o) {
    for (int k = 0; k < R; ++k) {
      const float* xk = x + static_cast<size_t>(k) * in;
      float part[4] = {};
      int i = 0;
      for (; i + 4 <= in; i += 4) {
        for (int u = 0; u < 4; ++u)
          part[u] += xk[i + u] * w[static_cast<size_t>(i + u) * out + o];
      }
      float s = layer.bias[o] + ((part[0] + part[1]) + (part[2] + part[3]));
      for (; i < in; ++i) s += xk[i] * w[static_cast<size_t>(i) * out + o];
      y[static_cast<size_t>(k) * out + o] = layer.relu && s < 0.0f ? 0.0f : s;
    }
  }
}

// Columns from o on in vectors of L/2, L/4, ... down to 4 lanes; returns the first
// column left. A layer of 24 outputs is one 16-lane and one 8-lane vector, not 8 scalar
// columns (which took a third of a member's dense time).
template <int L, int R>
GPUEST_INLINE int NarrowerColumns(const DenseLayer& layer, const float* x, float* y,
                                  int o) {
  if constexpr (L / 2 >= 4) {
    o = DenseColumns<L / 2, R, 1>(layer, x, y, o);
    o = NarrowerColumns<L / 2, R>(layer, x, y, o);
  }
  return o;
}

// R rows of y = x W^T + b: wide column blocks first, narrower ones for what is left.
// Four rows hold 4 x 2 accumulators; one row, 8.
template <int L, int R>
GPUEST_INLINE void DenseRows(const DenseLayer& layer, const float* x, float* y) {
  int o = 0;
  if constexpr (R == 1) {
    o = DenseColumns<L, 1, 8>(layer, x, y, o);
    o = DenseColumns<L, 1, 4>(layer, x, y, o);
  }
  o = DenseColumns<L, R, 2>(layer, x, y, o);
  o = DenseColumns<L, R, 1>(layer, x, y, o);
  o = NarrowerColumns<L, R>(layer, x, y, o);
  DenseTailColumns<R>(layer, x, y, o);
}

// y[rows][layer.out] = x[rows][layer.in] W^T + b (ReLU when the layer says so).
template <int L>
GPUEST_INLINE void Dense(const DenseLayer& layer, const float* x, int rows, float* y) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    DenseRows<L, 4>(layer, x + static_cast<size_t>(r) * layer.in,
                    y + static_cast<size_t>(r) * layer.out);
  }
  for (; r < rows; ++r) {
    DenseRows<L, 1>(layer, x + static_cast<size_t>(r) * layer.in,
                    y + static_cast<size_t>(r) * layer.out);
  }
}

// x = exp(x) for x <= 0 (softmax's shifted scores), as 2^(x log2 e): k = round(x log2 e)
// with the 1.5 * 2^23 trick (the sum's low bits are k), f = x log2 e - k in
// [-1/2, 1/2] (one FMA in the AVX builds), 2^f by a degree-5 polynomial fitted for
// relative error (at most 1.6e-7 in float, checked on 200,001 points), and 2^k made
// from k's bits. Twelve vector operations, where Cephes' expf takes about eighteen.
// Arguments below -87 are taken as -87: exp(-87) = 1.6e-38 where the exact answer is
// smaller still, nothing beside the maximum's exp(0) = 1 in the sum. NaN stays NaN.
template <int L>
GPUEST_INLINE void Exp(typename Lanes<L>::F& x) {
  using V = typename Lanes<L>::F;
  const V lowest = V{} - 87.0f;
  x = x < lowest ? lowest : x;
  constexpr float kLog2e = 1.44269504088896341f, kRound = 12582912.0f;  // 1.5 * 2^23
  const V shifted = x * kLog2e + kRound;
  const V k = shifted - kRound;
  const V f = x * kLog2e - k;
  V p = f * 1.326472032815218e-3f + 9.671512991189957e-3f;
  p = p * f + 5.550733581185341e-2f;
  p = p * f + 2.4022242426872253e-1f;
  p = p * f + 6.931470036506653e-1f;
  p = p * f + 1.0f;
  typename Lanes<L>::I bits;
  __builtin_memcpy(&bits, &shifted, sizeof bits);
  // k + 127 in the exponent field: the bits of kRound are 0x4b400000 + k.
  bits = (bits - (0x4b400000 - 127)) << 23;  // 2^k, k >= -126: a normal float.
  V two_k;
  __builtin_memcpy(&two_k, &bits, sizeof two_k);
  x = p * two_k;
}

// Pairwise: the halves added lane by lane until one is left. Whole half vectors while
// they are four lanes or more (in registers; an array of lanes went through the stack).
template <int L>
GPUEST_INLINE float SumOfLanes(const typename Lanes<L>::F& v) {
  if constexpr (L > 4) {
    typename Lanes<L / 2>::F low, high;
    __builtin_memcpy(&low, &v, sizeof low);
    __builtin_memcpy(&high, reinterpret_cast<const char*>(&v) + sizeof low, sizeof high);
    return SumOfLanes<L / 2>(low + high);
  } else {
    return (v[0] + v[2]) + (v[1] + v[3]);
  }
}

// x = LayerNorm(x + add) per row, eps 1e-5 (libtorch's default), in float as
// libtorch's CPU kernel computes it: whole vectors, then the columns past them.
template <int L>
GPUEST_INLINE void AddNorm(float* x, const float* add, int rows, int d, const float* w,
                           const float* b) {
  using V = typename Lanes<L>::F;
  const int whole = d / L * L;
  for (int r = 0; r < rows; ++r) {
    float* v = x + static_cast<size_t>(r) * d;
    const float* a = add + static_cast<size_t>(r) * d;
    V sum_v = {};
    float sum = 0;
    int j = 0;
    for (; j < whole; j += L) {
      V vv, av;
      GPUEST_LOAD(vv, v + j);
      GPUEST_LOAD(av, a + j);
      vv += av;
      GPUEST_STORE(v + j, vv);
      sum_v += vv;
    }
    for (; j < d; ++j) sum += v[j] += a[j];
    const float mean = (SumOfLanes<L>(sum_v) + sum) / static_cast<float>(d);
    V squares_v = {};
    float squares = 0;
    for (j = 0; j < whole; j += L) {
      V vv;
      GPUEST_LOAD(vv, v + j);
      vv -= mean;
      squares_v += vv * vv;
    }
    for (; j < d; ++j) squares += (v[j] - mean) * (v[j] - mean);
    const float inv =
        1.0f /
        std::sqrt((SumOfLanes<L>(squares_v) + squares) / static_cast<float>(d) + 1e-5f);
    for (j = 0; j < whole; j += L) {
      V vv, wv, bv;
      GPUEST_LOAD(vv, v + j);
      GPUEST_LOAD(wv, w + j);
      GPUEST_LOAD(bv, b + j);
      vv = (vv - mean) * inv * wv + bv;
      GPUEST_STORE(v + j, vv);
    }
    for (; j < d; ++j) v[j] = (v[j] - mean) * inv * w[j] + b[j];
  }
}

// A thread's buffers, reused by every call on it (grown, never shrunk): a call
// allocates only its result.
struct Workspace {
  std::vector<float> x, qkv, queries_t, attended, projected, hidden, scores, a, b;
};

// The sizes one layer's attention shares among its steps.
struct AttentionSizes {
  int n;   // Distinct tokens.
  int d;   // Model width: qkv holds 3d per token.
  int np;  // n padded to whole vectors.
  int hd;  // Head size.
};

// queries_t[c * np + t] = qkv's query channel c of token t, scaled; zeros past n.
template <int L>
GPUEST_INLINE void TransposeQueries(const AttentionSizes& z, float scale, Workspace& w) {
  const int n = z.n, d = z.d, np = z.np;
  w.queries_t.assign(static_cast<size_t>(d) * np, 0.0f);
  for (int t = 0; t < n; ++t) {
    const float* q = w.qkv.data() + static_cast<size_t>(t) * 3 * d;
    for (int c = 0; c < d; ++c)
      w.queries_t[static_cast<size_t>(c) * np + t] = q[c] * scale;
  }
}

// The scores of L queries (their channels of one head from queries_t) against every
// key: scores[s * L, + L) for key s, and top, their maximum per lane.
template <int L, int HD>
GPUEST_INLINE void HeadScores(const AttentionSizes& z, const float* queries_t,
                              const float* keys, float* scores,
                              typename Lanes<L>::F& top) {
  using V = typename Lanes<L>::F;
  const int n = z.n, d = z.d, np = z.np, hd = HD > 0 ? HD : z.hd;
  V queries[HD > 0 ? HD : 1];
  if constexpr (HD > 0) {
    for (int j = 0; j < HD; ++j)
      GPUEST_LOAD(queries[j], queries_t + static_cast<size_t>(j) * np);
  }
  top = V{} - 3e38f;
  for (int s = 0; s < n; ++s) {
    const float* k = keys + static_cast<size_t>(s) * 3 * d;
    V acc = {};
    for (int j = 0; j < hd; ++j) {
      if constexpr (HD > 0) {
        acc += queries[j] * k[j];
      } else {
        V q;
        GPUEST_LOAD(q, queries_t + static_cast<size_t>(j) * np);
        acc += q * k[j];
      }
    }
    top = acc > top ? acc : top;
    GPUEST_STORE(scores + static_cast<size_t>(s) * L, acc);
  }
}

// Head h's values weighed by the softmax of the L queries' scores (from t0), into
// w.attended. The softmax's numerators exp(score - top) are made as the first L value
// channels use them, and kept for the next ones where the head has more.
template <int L, int HD>
GPUEST_INLINE void WeighValues(const AttentionSizes& z, const float* values,
                               const float* counts, const typename Lanes<L>::F& top,
                               int h, int t0, float* scores, Workspace& w) {
  using V = typename Lanes<L>::F;
  const int n = z.n, d = z.d, hd = HD > 0 ? HD : z.hd;
  V total = {};
  const int lanes = std::min(L, n - t0);
  for (int j0 = 0; j0 < hd; j0 += L) {  // Up to L value channels at once.
    const int channels = HD > 0 ? HD : std::min(L, hd - j0);
    V acc[HD > 0 ? HD : L] = {};
    for (int s = 0; s < n; ++s) {
      float* numerator = scores + static_cast<size_t>(s) * L;
      V p;
      GPUEST_LOAD(p, numerator);
      if (j0 == 0) {
        p -= top;
        Exp<L>(p);
        p *= counts[s];
        total += p;
        if (hd > L) GPUEST_STORE(numerator, p);
      }
      const float* v = values + static_cast<size_t>(s) * 3 * d + j0;
      for (int j = 0; j < channels; ++j) acc[j] += p * v[j];
    }
    const V inv_total = 1.0f / total;
    for (int j = 0; j < channels; ++j) {
      const V out = acc[j] * inv_total;
      for (int u = 0; u < lanes; ++u) {
        w.attended[static_cast<size_t>(t0 + u) * d + h * hd + j0 + j] = out[u];
      }
    }
  }
}

// One encoder layer's self-attention: attended[n][d] from qkv[n][3d] over the n
// distinct tokens, each key and value weighed by counts, L queries at a time, one per
// vector lane: every step (scores, max, exp, sum, weighted values) is a whole vector,
// with no sums across lanes. The queries are transposed per channel, scaled, and padded
// with zeros to whole vectors (the padding's answers are dropped). HD is the head size
// where it is known when compiling (1 to 8: the shipped members have 4, 6 and 8), so that
// a head's queries and value sums stay in registers; 0 reads it from the layer.
template <int L, int HD>
GPUEST_INLINE void Attention(const EncoderLayer& layer, int n, int d, const float* counts,
                             Workspace& w) {
  using V = typename Lanes<L>::F;
  static_assert(HD >= 0 && HD <= 8);
  const int np = Padded<L>(n), hd = HD > 0 ? HD : d / layer.heads;
  const AttentionSizes z{n, d, np, hd};
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  TransposeQueries<L>(z, scale, w);
  w.scores.resize(static_cast<size_t>(n) * L);
  float* scores = w.scores.data();
  for (int h = 0; h < layer.heads; ++h) {
    const float* keys = w.qkv.data() + d + h * hd;        // keys[s * 3d + j]
    const float* values = w.qkv.data() + 2 * d + h * hd;  // values[s * 3d + j]
    for (int t0 = 0; t0 < n; t0 += L) {
      // Channel j of this head for the L queries: queries_t[j * np, + L).
      const float* queries_t = w.queries_t.data() + static_cast<size_t>(h * hd) * np + t0;
      V top;
      HeadScores<L, HD>(z, queries_t, keys, scores, top);
      WeighValues<L, HD>(z, values, counts, top, h, t0, scores, w);
    }
  }
}

// Attention<HD> for the layer's head size: the sizes of the shipped members compiled
// for, any other read at run time.
template <int L>
GPUEST_INLINE void Attention(const EncoderLayer& layer, int n, int d, const float* counts,
                             Workspace& w) {
  switch (d / layer.heads) {
    case 4:
      return Attention<L, 4>(layer, n, d, counts, w);
    case 6:
      return Attention<L, 6>(layer, n, d, counts, w);
    case 8:
      return Attention<L, 8>(layer, n, d, counts, w);
    default:
      return Attention<L, 0>(layer, n, d, counts, w);
  }
}

// The trunk and heads on one row; the result is in w.a.
template <int L>
GPUEST_INLINE void Trunk(const DenseNet& net, Workspace& w) {
  for (const DenseLayer& layer : net) {
    w.b.resize(layer.out);
    Dense<L>(layer, w.a.data(), 1, w.b.data());
    w.a.swap(w.b);
  }
}

template <int L>
GPUEST_INLINE void Forward(const PlainNet& net, const std::vector<float>& global,
                           const TokenSet& tokens, Workspace& w) {
  w.a.clear();
  if (net.d == 0) {
    w.a.assign(global.begin(), global.end());
    Trunk<L>(net.trunk, w);
    return;
  }
  const int n = static_cast<int>(tokens.types.size()), d = net.d;
  const size_t nd = static_cast<size_t>(n) * d;
  w.x.resize(nd);
  Dense<L>(net.projection, tokens.numbers.data(), n, w.x.data());
  for (int t = 0; t < n; ++t) {
    const float* e = net.embedding.data() + static_cast<size_t>(tokens.types[t]) * d;
    for (int j = 0; j < d; ++j) w.x[static_cast<size_t>(t) * d + j] += e[j];
  }
  w.attended.resize(nd);
  w.projected.resize(nd);
  for (const EncoderLayer& layer : net.layers) {
    w.qkv.resize(nd * 3);
    Dense<L>(layer.in_proj, w.x.data(), n, w.qkv.data());
    Attention<L>(layer, n, d, tokens.counts.data(), w);
    Dense<L>(layer.out_proj, w.attended.data(), n, w.projected.data());
    AddNorm<L>(w.x.data(), w.projected.data(), n, d, layer.norm1_w.data(),
               layer.norm1_b.data());
    w.hidden.resize(static_cast<size_t>(n) * layer.feedforward);
    Dense<L>(layer.linear1, w.x.data(), n, w.hidden.data());
    Dense<L>(layer.linear2, w.hidden.data(), n, w.projected.data());
    AddNorm<L>(w.x.data(), w.projected.data(), n, d, layer.norm2_w.data(),
               layer.norm2_b.data());
  }
  // The mean over every token (libtorch's sum, then division by the count; none: 0).
  w.a.assign(d, 0.0f);
  for (int t = 0; t < n; ++t) {
    for (int j = 0; j < d; ++j)
      w.a[j] += w.x[static_cast<size_t>(t) * d + j] * tokens.counts[t];
  }
  const float occurrences = static_cast<float>(std::max<size_t>(tokens.occurrences, 1));
  for (int j = 0; j < d; ++j) w.a[j] /= occurrences;
  w.a.insert(w.a.end(), global.begin(), global.end());
  Trunk<L>(net.trunk, w);
}

void ForwardPortable(const PlainNet& net, const std::vector<float>& global,
                     const TokenSet& tokens, Workspace& w) {
  Forward<8>(net, global, tokens, w);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void ForwardAvx2Fma(const PlainNet& net,
                                                        const std::vector<float>& global,
                                                        const TokenSet& tokens,
                                                        Workspace& w) {
  Forward<8>(net, global, tokens, w);
}

__attribute__((target("avx512f,avx2,fma"))) void ForwardAvx512(
    const PlainNet& net, const std::vector<float>& global, const TokenSet& tokens,
    Workspace& w) {
  Forward<16>(net, global, tokens, w);
}
#endif

}  // namespace

std::vector<ForwardKernels> SupportedForwardKernels() {
  std::vector<ForwardKernels> kernels = {ForwardKernels::kPortable};
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    kernels.push_back(ForwardKernels::kAvx2Fma);
    if (__builtin_cpu_supports("avx512f")) kernels.push_back(ForwardKernels::kAvx512);
  }
#endif
  return kernels;
}

ForwardKernels BestForwardKernels() {
  static const ForwardKernels best = SupportedForwardKernels().back();
  return best;
}

TokenSet DistinctTokens(const EncodedSequence& seq) {
  // Sorted by type and the numbers' bits, so that equal tokens are next to each other.
  struct Token {
    int64_t type;
    uint32_t bits[2];
    auto Key() const { return std::tie(type, bits[0], bits[1]); }
  };
  const size_t n = seq.types.size();
  std::vector<Token> sorted(n);
  for (size_t t = 0; t < n; ++t) {
    sorted[t].type = seq.types[t];
    __builtin_memcpy(sorted[t].bits, seq.numbers.data() + 2 * t, sizeof sorted[t].bits);
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const Token& a, const Token& b) { return a.Key() < b.Key(); });
  TokenSet set;
  set.occurrences = n;
  for (size_t t = 0; t < n; ++t) {
    if (t > 0 && sorted[t].Key() == sorted[t - 1].Key()) {
      set.counts.back() += 1.0f;
      continue;
    }
    float numbers[2];
    __builtin_memcpy(numbers, sorted[t].bits, sizeof numbers);
    set.types.push_back(sorted[t].type);
    set.numbers.insert(set.numbers.end(), numbers, numbers + 2);
    set.counts.push_back(1.0f);
  }
  return set;
}

std::vector<float> PlainForward(const PlainNet& net, const std::vector<float>& global,
                                const TokenSet& tokens, ForwardKernels kernels) {
  thread_local Workspace workspace;
  // Never more than the CPU runs: a kernel it lacks would die on an illegal instruction.
  kernels = std::min(kernels, BestForwardKernels());
  switch (kernels) {
#if defined(__x86_64__)
    case ForwardKernels::kAvx512:
      ForwardAvx512(net, global, tokens, workspace);
      return workspace.a;
    case ForwardKernels::kAvx2Fma:
      ForwardAvx2Fma(net, global, tokens, workspace);
      return workspace.a;
#endif
    default:
      ForwardPortable(net, global, tokens, workspace);
      return workspace.a;
  }
}

std::vector<float> PlainForward(const PlainNet& net, const std::vector<float>& global,
                                const EncodedSequence& seq, ForwardKernels kernels) {
  return PlainForward(net, global, DistinctTokens(seq), kernels);
}

}  // namespace gpuest::gpumemnet
