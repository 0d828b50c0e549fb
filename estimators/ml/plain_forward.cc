#include "estimators/ml/plain_forward.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace gpuest::ml {
namespace {

// Every helper is inlined into the two entry points at the bottom, so that the same
// source is compiled once for the baseline x86-64 (SSE2) and once for AVX2 with FMA;
// which one runs is chosen at run time (no -march: the binary runs on any x86-64).
#define GPUEST_INLINE inline __attribute__((always_inline))

// Eight floats in the compiler's generic vectors: one AVX register, or two SSE ones.
// Only ever a local inside the inlined helpers (never passed between functions, whose
// ABI would differ between the two builds).
typedef float V8 __attribute__((vector_size(32)));
typedef int32_t V8i __attribute__((vector_size(32)));
constexpr int kLanes = 8;

#define GPUEST_LOAD8(v, p) __builtin_memcpy(&(v), (p), sizeof(V8))
#define GPUEST_STORE8(p, v) __builtin_memcpy((p), &(v), sizeof(V8))

int Padded(int n) { return (n + kLanes - 1) / kLanes * kLanes; }

// y[R][out] = x[R][in] W^T + b for R rows at once: each weight vector loaded is used
// R times, and the accumulators stay in registers.
template <int R>
GPUEST_INLINE void DenseBlock(const DenseLayer& layer, const float* x, float* y) {
  const int in = layer.in, out = layer.out;
  const float* w = layer.weight_t.data();
  const float* b = layer.bias.data();
  int o = 0;
  for (; o + kLanes <= out; o += kLanes) {
    V8 acc[R];
    V8 bias;
    GPUEST_LOAD8(bias, b + o);
    for (int k = 0; k < R; ++k) acc[k] = bias;
    for (int i = 0; i < in; ++i) {
      V8 wv;
      GPUEST_LOAD8(wv, w + static_cast<size_t>(i) * out + o);
      for (int k = 0; k < R; ++k) acc[k] += x[static_cast<size_t>(k) * in + i] * wv;
    }
    for (int k = 0; k < R; ++k) {
      if (layer.relu) acc[k] = acc[k] > 0.0f ? acc[k] : 0.0f;
      GPUEST_STORE8(y + static_cast<size_t>(k) * out + o, acc[k]);
    }
  }
  for (; o < out; ++o) {  // The columns past the last full vector.
    for (int k = 0; k < R; ++k) {
      float s = b[o];
      for (int i = 0; i < in; ++i) {
        s += x[static_cast<size_t>(k) * in + i] * w[static_cast<size_t>(i) * out + o];
      }
      y[static_cast<size_t>(k) * out + o] = layer.relu && s < 0.0f ? 0.0f : s;
    }
  }
}

// y[rows][layer.out] = x[rows][layer.in] W^T + b (ReLU when the layer says so).
GPUEST_INLINE void Dense(const DenseLayer& layer, const float* x, int rows, float* y) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    DenseBlock<4>(layer, x + static_cast<size_t>(r) * layer.in,
                  y + static_cast<size_t>(r) * layer.out);
  }
  for (; r < rows; ++r) {
    DenseBlock<1>(layer, x + static_cast<size_t>(r) * layer.in,
                  y + static_cast<size_t>(r) * layer.out);
  }
}

// p[0..8) = exp(p[i] - top[i]) for top[i] >= p[i] (softmax's shifted scores), added
// to total too: Cephes' expf (range reduction by ln 2, degree-6 polynomial, about
// 1 ulp); exp(x) < 1.7e-38 below -87 is 0.
GPUEST_INLINE void Exp8(float* p, const V8& top, V8& total) {
  V8 x;
  GPUEST_LOAD8(x, p);
  x -= top;
  const V8 lowest = V8{} - 87.0f;
  const auto underflow = x < lowest;
  x = underflow ? lowest : x;
  // k = round(x / ln 2) with the 1.5 * 2^23 trick; its bits give k as an integer.
  const V8 shifted = x * 1.44269504088896341f + 12582912.0f;
  const V8 k = shifted - 12582912.0f;
  V8i ki;
  __builtin_memcpy(&ki, &shifted, sizeof ki);
  ki -= 0x4b400000;  // The bits of 12582912.0f.
  V8 r = x - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  V8 poly = r * 1.9875691500e-4f + 1.3981999507e-3f;
  poly = poly * r + 8.3334519073e-3f;
  poly = poly * r + 4.1665795894e-2f;
  poly = poly * r + 1.6666665459e-1f;
  poly = poly * r + 5.0000001201e-1f;
  V8 y = poly * r * r + r + 1.0f;
  const V8i bits = (ki + 127) << 23;  // 2^k.
  V8 two_k;
  __builtin_memcpy(&two_k, &bits, sizeof two_k);
  y *= two_k;
  y = underflow ? V8{} : y;
  GPUEST_STORE8(p, y);
  total += y;
}

// x = LayerNorm(x + add) per row, eps 1e-5 (libtorch's default).
GPUEST_INLINE void AddNorm(float* x, const float* add, int rows, int d, const float* w,
                           const float* b) {
  for (int r = 0; r < rows; ++r) {
    float* v = x + static_cast<size_t>(r) * d;
    const float* a = add + static_cast<size_t>(r) * d;
    double mean = 0, var = 0;
    for (int j = 0; j < d; ++j) {
      v[j] += a[j];
      mean += v[j];
    }
    mean /= d;
    for (int j = 0; j < d; ++j) var += (v[j] - mean) * (v[j] - mean);
    const double inv = 1.0 / std::sqrt(var / d + 1e-5);
    for (int j = 0; j < d; ++j) {
      v[j] = static_cast<float>((v[j] - mean) * inv) * w[j] + b[j];
    }
  }
}

// A thread's buffers, reused by every call on it (grown, never shrunk): a call
// allocates only its result.
struct Workspace {
  std::vector<float> x, qkv, queries_t, attended, projected, hidden, scores, a, b;
};

// One encoder layer's self-attention: attended[n][d] from qkv[n][3d], eight queries
// at a time, one per vector lane: every step (scores, max, exp, sum, weighted values)
// is a whole vector, with no sums across lanes. The queries are transposed per
// channel, scaled, and padded with zeros to whole vectors (the padding's answers are
// dropped).
GPUEST_INLINE void Attention(const EncoderLayer& layer, int n, int d, Workspace& w) {
  const int np = Padded(n), hd = d / layer.heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  w.queries_t.assign(static_cast<size_t>(d) * np, 0.0f);
  for (int t = 0; t < n; ++t) {
    const float* q = w.qkv.data() + static_cast<size_t>(t) * 3 * d;
    for (int c = 0; c < d; ++c)
      w.queries_t[static_cast<size_t>(c) * np + t] = q[c] * scale;
  }
  w.scores.resize(static_cast<size_t>(n) * kLanes);
  float* scores = w.scores.data();
  for (int h = 0; h < layer.heads; ++h) {
    const float* keys = w.qkv.data() + d + h * hd;        // keys[s * 3d + j]
    const float* values = w.qkv.data() + 2 * d + h * hd;  // values[s * 3d + j]
    for (int t0 = 0; t0 < n; t0 += kLanes) {
      V8 top = V8{} - 3e38f;
      for (int s = 0; s < n; ++s) {
        const float* k = keys + static_cast<size_t>(s) * 3 * d;
        V8 acc = {};
        for (int j = 0; j < hd; ++j) {
          V8 q;
          GPUEST_LOAD8(q, w.queries_t.data() + static_cast<size_t>(h * hd + j) * np + t0);
          acc += q * k[j];
        }
        top = acc > top ? acc : top;
        GPUEST_STORE8(scores + static_cast<size_t>(s) * kLanes, acc);
      }
      V8 total = {};
      for (int s = 0; s < n; ++s)
        Exp8(scores + static_cast<size_t>(s) * kLanes, top, total);
      const V8 inv_total = 1.0f / total;
      const int lanes = std::min(kLanes, n - t0);
      for (int j0 = 0; j0 < hd; j0 += kLanes) {  // Up to eight value channels at once.
        const int channels = std::min(kLanes, hd - j0);
        V8 acc[kLanes] = {};
        for (int s = 0; s < n; ++s) {
          V8 p;
          GPUEST_LOAD8(p, scores + static_cast<size_t>(s) * kLanes);
          const float* v = values + static_cast<size_t>(s) * 3 * d + j0;
          for (int j = 0; j < channels; ++j) acc[j] += p * v[j];
        }
        for (int j = 0; j < channels; ++j) {
          const V8 out = acc[j] * inv_total;
          for (int u = 0; u < lanes; ++u) {
            w.attended[static_cast<size_t>(t0 + u) * d + h * hd + j0 + j] = out[u];
          }
        }
      }
    }
  }
}

// The trunk and heads on one row; the result is in w.a.
GPUEST_INLINE void Trunk(const DenseNet& net, Workspace& w) {
  for (const DenseLayer& layer : net) {
    w.b.resize(layer.out);
    Dense(layer, w.a.data(), 1, w.b.data());
    w.a.swap(w.b);
  }
}

GPUEST_INLINE void Forward(const PlainNet& net, const std::vector<float>& global,
                           const EncodedSequence& seq, Workspace& w) {
  w.a.clear();
  if (net.d == 0) {
    w.a.assign(global.begin(), global.end());
    Trunk(net.trunk, w);
    return;
  }
  const int n = static_cast<int>(seq.types.size()), d = net.d;
  const size_t nd = static_cast<size_t>(n) * d;
  w.x.resize(nd);
  Dense(net.projection, seq.numbers.data(), n, w.x.data());
  for (int t = 0; t < n; ++t) {
    const float* e = net.embedding.data() + static_cast<size_t>(seq.types[t]) * d;
    for (int j = 0; j < d; ++j) w.x[static_cast<size_t>(t) * d + j] += e[j];
  }
  w.attended.resize(nd);
  w.projected.resize(nd);
  for (const EncoderLayer& layer : net.layers) {
    w.qkv.resize(nd * 3);
    Dense(layer.in_proj, w.x.data(), n, w.qkv.data());
    Attention(layer, n, d, w);
    Dense(layer.out_proj, w.attended.data(), n, w.projected.data());
    AddNorm(w.x.data(), w.projected.data(), n, d, layer.norm1_w.data(),
            layer.norm1_b.data());
    w.hidden.resize(static_cast<size_t>(n) * layer.feedforward);
    Dense(layer.linear1, w.x.data(), n, w.hidden.data());
    Dense(layer.linear2, w.hidden.data(), n, w.projected.data());
    AddNorm(w.x.data(), w.projected.data(), n, d, layer.norm2_w.data(),
            layer.norm2_b.data());
  }
  w.a.assign(d, 0.0f);
  for (int t = 0; t < n; ++t) {
    for (int j = 0; j < d; ++j) w.a[j] += w.x[static_cast<size_t>(t) * d + j] / n;
  }
  w.a.insert(w.a.end(), global.begin(), global.end());
  Trunk(net.trunk, w);
}

void ForwardPortable(const PlainNet& net, const std::vector<float>& global,
                     const EncodedSequence& seq, Workspace& w) {
  Forward(net, global, seq, w);
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) void ForwardAvx2Fma(const PlainNet& net,
                                                        const std::vector<float>& global,
                                                        const EncodedSequence& seq,
                                                        Workspace& w) {
  Forward(net, global, seq, w);
}
#endif

}  // namespace

ForwardKernels BestForwardKernels() {
#if defined(__x86_64__)
  static const ForwardKernels best =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
          ? ForwardKernels::kAvx2Fma
          : ForwardKernels::kPortable;
  return best;
#else
  return ForwardKernels::kPortable;
#endif
}

std::vector<float> PlainForward(const PlainNet& net, const std::vector<float>& global,
                                const EncodedSequence& seq, ForwardKernels kernels) {
  thread_local Workspace workspace;
#if defined(__x86_64__)
  if (kernels == ForwardKernels::kAvx2Fma &&
      BestForwardKernels() == ForwardKernels::kAvx2Fma) {
    ForwardAvx2Fma(net, global, seq, workspace);
    return workspace.a;
  }
#endif
  ForwardPortable(net, global, seq, workspace);
  return workspace.a;
}

}  // namespace gpuest::ml
