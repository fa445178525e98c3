// The sequence-model kernel bodies, written once (portable.h) like kernel_bodies.h: run by a GPU
// (cuda_kernels_seq.cu) and by the grid emulator (emulated_kernels_seq.cc), each mirroring an op's
// CPU kernel in engine/ops/. fmaf exactly where GCC fuses the CPU loop (-O3 -march=x86-64-v3
// contracts a * b + c when the product has no other use; a product that also feeds another
// product is not fused; a sum of products is vectorised: AddProduct), pinned by the op tests
// against the CPU kernels (seq_ops_test). Over 600 lines on purpose: one header per model family
// (kernel_bodies.h, _cnn.h, _seq.h), each body next to the ones whose rounding it shares.
//
//   Activation / ActivationGrad  SIGMOID, TANH (expf, tanhf: the C library's on the CPU and in
//                                emulation, CUDA's within 2 ulp), GELU (vector_math's lanes,
//                                polynomial erf and exp, op for op: exact everywhere)
//   Binary                       ADD, SUB, MUL and MUL's gradient
//   SoftmaxGradRows              SOFTMAX's gradient, one thread per row
//   LayerNormRows                LAYER_NORM forward, one thread per row (moments in the CPU's
//                                order), LayerNormRowGrad: dx and the row's moments,
//                                LayerNormParamGrad: dgamma, dbeta, one thread per column
//   Reduce / ReduceGrad          SUM, MEAN over any axes: one thread per output element adds its
//                                inputs in the CPU's (row-major) order
//   Concat / SliceColumns        CONCAT (a gather over up to kMaxConcatInputs inputs) and its
//                                gradient (each input's columns of d_out)
//   ArgmaxRows                   ARGMAX, the first largest
//   Gather / EmbeddingGrad       EMBEDDING; its gradient with one thread per table element
//   Dropout                      DROPOUT's mask: Philox-4x32-10 (engine/philox.h), 4 per call
//   RowsToHeads / HeadsToRows, AttentionSoftmax, AttentionSoftmaxGrad   SELF_ATTENTION
//
// Determinism: no kernel here uses atomics; every output element is written by one thread that
// adds its terms in a fixed order (EMBEDDING's gradient too: the thread that owns table element
// (v, j) scans the ids in order and adds dy[i, j] where ids[i] = v, the CPU's order of
// additions), so results do not depend on the grid or the schedule.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_KERNEL_BODIES_SEQ_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_KERNEL_BODIES_SEQ_H_

#include <math.h>
#include <string.h>

#include <cstdint>

#include "engine/kernels/gpu/kernel_bodies.h"
#include "engine/kernels/gpu/portable.h"
#include "engine/kernels/gpu/seq_params.h"

namespace lockstep::engine::gpu {

// ---- GELU as engine/kernels/cpu/vector_math.cc computes each AVX2 lane ----

// _mm256_min_ps / _mm256_max_ps: the second operand when either is NaN.
LS_HOST_DEVICE inline float LaneMin(float a, float b) { return a < b ? a : b; }
LS_HOST_DEVICE inline float LaneMax(float a, float b) { return a > b ? a : b; }
LS_HOST_DEVICE inline float BitsToFloat(int32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

LS_HOST_DEVICE inline float LaneExp(float x) {
  x = LaneMin(LaneMax(x, -88.3762626647949f), 88.3762626647949f);
  const float n = floorf(fmaf(x, 1.44269504088896341f, 0.5f));
  float r = fmaf(-n, 0.693359375f, x);
  r = fmaf(-n, -2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  p = fmaf(p, r * r, r + 1.f);
  const int32_t e =
      static_cast<int32_t>(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  return p * BitsToFloat(e);
}

LS_HOST_DEVICE inline float LaneErf(float v) {
  const float x = LaneMin(LaneMax(v, -4.f), 4.f);
  const float x2 = x * x;
  float p = fmaf(x2, -2.72614225801306e-10f, 2.77068142495902e-08f);
  p = fmaf(x2, p, -2.10102402082508e-06f);
  p = fmaf(x2, p, -5.69250639462346e-05f);
  p = fmaf(x2, p, -7.34990630326855e-04f);
  p = fmaf(x2, p, -2.95459980854025e-03f);
  p = fmaf(x2, p, -1.60960333262415e-02f);
  float q = fmaf(x2, -1.45660718464996e-05f, -2.13374055278905e-04f);
  q = fmaf(x2, q, -1.68282697438203e-03f);
  q = fmaf(x2, q, -7.37332916720468e-03f);
  q = fmaf(x2, q, -1.42647390514189e-02f);
  return (x * p) / q;
}

LS_HOST_DEVICE inline float LanePhi(float x) {
  return fmaf(LaneErf(x * 0.7071067811865476f), 0.5f, 0.5f);
}

// ---- Philox-4x32-10 as engine/philox.cc's Generate(counter_lo) ----

struct PhiloxWords {
  uint32_t w[4];
};

LS_HOST_DEVICE inline PhiloxWords PhiloxGenerate(uint64_t key, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0,
           c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return PhiloxWords{{c0, c1, c2, c3}};
}

// Term j of the sum of n products `s += a[j] * b[j]` as GCC compiles the CPU loop (-O3
// -march=x86-64-v3, no -ffast-math): vectorised as an in-order reduction, the products of the
// first 4 * floor(n / 4) terms are rounded in vector lanes (vmulps) and added one by one
// (vaddss); the last n % 4, left to the scalar loop, are fused (vfmadd231ss).
LS_HOST_DEVICE inline float AddProduct(float s, float a, float b, int64_t j, int64_t n) {
  return j < (n & ~int64_t{3}) ? s + a * b : fmaf(a, b, s);
}

// An index of type L (seq_params.h's IndexType) as an integer.
template <typename L>
LS_HOST_DEVICE inline int64_t AsIndex(L v) {
  return static_cast<int64_t>(v);
}

// ---- element-wise ----

// SIGMOID 1 / (1 + expf(-x)); TANH tanhf(x); GELU x * Phi(x) (vector_math's lanes).
template <class A>
struct ActivationKernel {
  ActivationOp op;
  typename A::template In<float> x;
  typename A::template Out<float> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      const float v = x.Load(i);
      float r;
      if (op == ActivationOp::kSigmoid) {
        r = 1.f / (1.f + expf(-v));
      } else if (op == ActivationOp::kTanh) {
        r = tanhf(v);
      } else {
        r = v * LanePhi(v);
      }
      y.Store(i, r);
    }
  }
};

// From the output y where the CPU uses it:
//   SIGMOID dy * y * (1 - y);  TANH dy * fmaf(-y, y, 1) (1 - y * y, fused by GCC);
//   GELU    dy * fmaf(x, 0.3989... * exp(-0.5 x^2), Phi(x))   (vector_math's lanes)
template <class A>
struct ActivationGradKernel {
  ActivationOp op;
  typename A::template In<float> x;
  typename A::template In<float> y;
  typename A::template In<float> dy;
  typename A::template Out<float> dx;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      const float g = dy.Load(i);
      float r;
      if (op == ActivationOp::kSigmoid) {
        const float v = y.Load(i);
        r = g * v * (1.f - v);
      } else if (op == ActivationOp::kTanh) {
        const float v = y.Load(i);
        r = g * fmaf(-v, v, 1.f);
      } else {
        const float v = x.Load(i);
        const float density = 0.3989422804014327f * LaneExp(-0.5f * (v * v));
        r = g * fmaf(v, density, LanePhi(v));
      }
      dx.Store(i, r);
    }
  }
};

template <class A>
struct BinaryKernel {
  BinaryOp op;
  typename A::template In<float> a;
  typename A::template In<float> b;
  typename A::template Out<float> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      const float u = a.Load(i), v = b.Load(i);
      y.Store(i, op == BinaryOp::kAdd ? u + v : op == BinaryOp::kSub ? u - v : u * v);
    }
  }
};

// ---- rows ----

// SOFTMAX's gradient from its output: dot = sum dy * y (AddProduct), dx = y * (dy - dot).
template <class A>
struct SoftmaxGradRowsKernel {
  typename A::template In<float> y;
  typename A::template In<float> dy;
  typename A::template Out<float> dx;
  int64_t rows;
  int64_t cols;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t r = FirstIndex(t); r < rows; r += Stride(t)) {
      const int64_t base = r * cols;
      float dot = 0.f;
      for (int64_t j = 0; j < cols; ++j) {
        dot = AddProduct(dot, dy.Load(base + j), y.Load(base + j), j, cols);
      }
      for (int64_t j = 0; j < cols; ++j) {
        dx.Store(base + j, y.Load(base + j) * (dy.Load(base + j) - dot));
      }
    }
  }
};

// A row's mean and 1 / sqrt(var + eps) as LayerNormKernel::Moments (the squares' sum as
// AddProduct).
template <class In>
LS_HOST_DEVICE inline void RowMoments(const In& x, int64_t base, int64_t cols, float eps,
                                      float* mean, float* rstd) {
  float m = 0.f, var = 0.f;
  for (int64_t j = 0; j < cols; ++j) m += x.Load(base + j);
  m /= float(cols);
  for (int64_t j = 0; j < cols; ++j) {
    const float d = x.Load(base + j) - m;
    var = AddProduct(var, d, d, j, cols);
  }
  var /= float(cols);
  *mean = m;
  *rstd = 1.f / sqrtf(var + eps);
}

// y = fmaf(gamma, (x - mean) * rstd, beta), one thread per row.
template <class A>
struct LayerNormRowsKernel {
  typename A::template In<float> x;
  typename A::template In<float> gamma;
  typename A::template In<float> beta;
  typename A::template Out<float> y;
  int64_t rows;
  int64_t cols;
  float eps;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t r = FirstIndex(t); r < rows; r += Stride(t)) {
      const int64_t base = r * cols;
      float mean, rstd;
      RowMoments(x, base, cols, eps, &mean, &rstd);
      for (int64_t j = 0; j < cols; ++j) {
        y.Store(base + j, fmaf(gamma.Load(j), (x.Load(base + j) - mean) * rstd, beta.Load(j)));
      }
    }
  }
};

// One thread per row: the row's (mean, rstd) into stats[2r, 2r + 1] and, when with_dx,
//   g = dy * gamma;  sum_g += g (not fused: g also feeds a product);  sum_gx = fmaf(g, xhat, .)
// (this loop's conditional stores keep GCC from vectorising it: every term fused)
//   dx = rstd * fmaf(-xhat, mean_gx, fmaf(dy, gamma, -mean_g))
template <class A>
struct LayerNormRowGradKernel {
  typename A::template In<float> x;
  typename A::template In<float> gamma;
  typename A::template In<float> dy;
  typename A::template Out<float> stats;
  typename A::template Out<float> dx;
  int64_t rows;
  int64_t cols;
  float eps;
  bool with_dx;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t r = FirstIndex(t); r < rows; r += Stride(t)) {
      const int64_t base = r * cols;
      float mean, rstd;
      RowMoments(x, base, cols, eps, &mean, &rstd);
      stats.Store(2 * r, mean);
      stats.Store(2 * r + 1, rstd);
      if (!with_dx) continue;
      float sum_g = 0.f, sum_gx = 0.f;
      for (int64_t j = 0; j < cols; ++j) {
        const float xhat = (x.Load(base + j) - mean) * rstd;
        const float g = dy.Load(base + j) * gamma.Load(j);
        sum_g = sum_g + g;
        sum_gx = fmaf(g, xhat, sum_gx);
      }
      const float mean_g = sum_g / float(cols), mean_gx = sum_gx / float(cols);
      for (int64_t j = 0; j < cols; ++j) {
        const float xhat = (x.Load(base + j) - mean) * rstd;
        const float inner = fmaf(-xhat, mean_gx, fmaf(dy.Load(base + j), gamma.Load(j), -mean_g));
        dx.Store(base + j, rstd * inner);
      }
    }
  }
};

// One thread per column j, down the rows in order: dgamma = fmaf(dy, xhat, dgamma), dbeta += dy.
template <class A>
struct LayerNormParamGradKernel {
  typename A::template In<float> x;
  typename A::template In<float> dy;
  typename A::template In<float> stats;
  typename A::template Out<float> dgamma;
  typename A::template Out<float> dbeta;
  int64_t rows;
  int64_t cols;
  bool with_dgamma;
  bool with_dbeta;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t j = FirstIndex(t); j < cols; j += Stride(t)) {
      float sg = 0.f, sb = 0.f;
      for (int64_t r = 0; r < rows; ++r) {
        const float g = dy.Load(r * cols + j);
        const float xhat = (x.Load(r * cols + j) - stats.Load(2 * r)) * stats.Load(2 * r + 1);
        sg = fmaf(g, xhat, sg);
        sb = sb + g;
      }
      if (with_dgamma) dgamma.Store(j, sg);
      if (with_dbeta) dbeta.Store(j, sb);
    }
  }
};

// ---- reductions ----

// The input offset of the first element of output o, and the number of reduced elements.
LS_HOST_DEVICE inline int64_t ReducedBase(const ReducePlan& p, int64_t o) {
  int64_t offset = 0, stride = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    if (!p.reduced[d]) {
      offset += (o % p.dims[d]) * stride;
      o /= p.dims[d];
    }
    stride *= p.dims[d];
  }
  return offset;
}

// The input offset of the k-th reduced element (row-major over the reduced axes) from a base.
LS_HOST_DEVICE inline int64_t ReducedOffset(const ReducePlan& p, int64_t k) {
  int64_t offset = 0, stride = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    if (p.reduced[d]) {
      offset += (k % p.dims[d]) * stride;
      k /= p.dims[d];
    }
    stride *= p.dims[d];
  }
  return offset;
}

// The output index of input element i.
LS_HOST_DEVICE inline int64_t ReducedOutput(const ReducePlan& p, int64_t i) {
  int64_t o = 0, stride = 1;
  for (int d = p.rank - 1; d >= 0; --d) {
    const int64_t c = i % p.dims[d];
    i /= p.dims[d];
    if (!p.reduced[d]) {
      o += c * stride;
      stride *= p.dims[d];
    }
  }
  return o;
}

// y[o] = (sum of its inputs in increasing input order) * scale (MEAN's scale a separate
// product, as the CPU's second loop).
template <class A>
struct ReduceKernel {
  ReducePlan p;
  typename A::template In<float> x;
  typename A::template Out<float> y;
  int64_t outputs;
  int64_t per_output;
  bool mean;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t o = FirstIndex(t); o < outputs; o += Stride(t)) {
      const int64_t base = ReducedBase(p, o);
      float s = 0.f;
      for (int64_t k = 0; k < per_output; ++k) s += x.Load(base + ReducedOffset(p, k));
      y.Store(o, mean ? s * p.scale : s);
    }
  }
};

// dx[i] = dy[output of i] * scale.
template <class A>
struct ReduceGradKernel {
  ReducePlan p;
  typename A::template In<float> dy;
  typename A::template Out<float> dx;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      dx.Store(i, dy.Load(ReducedOutput(p, i)) * p.scale);
    }
  }
};

// ---- copies ----

template <class A>
struct ConcatKernel {
  typename A::template In<float> in[kMaxConcatInputs];
  int64_t width[kMaxConcatInputs];
  int inputs;
  int64_t row;
  typename A::template Out<float> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      const int64_t o = i / row;
      int64_t c = i % row;
      int k = 0;
      while (k + 1 < inputs && c >= width[k]) c -= width[k++];
      y.Store(i, in[k].Load(o * width[k] + c));
    }
  }
};

// dst[o, j] = src[o, offset + j]: dst [outer, width] from src [outer, row].
template <class A>
struct SliceColumnsKernel {
  typename A::template In<float> src;
  typename A::template Out<float> dst;
  int64_t row;
  int64_t offset;
  int64_t width;
  int64_t n;  // outer * width
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      dst.Store(i, src.Load((i / width) * row + offset + i % width));
    }
  }
};

// idx[r] = the first j with the row's largest value (FirstLargest).
template <class A>
struct ArgmaxRowsKernel {
  typename A::template In<float> x;
  typename A::template Out<int64_t> idx;
  int64_t rows;
  int64_t cols;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t r = FirstIndex(t); r < rows; r += Stride(t)) {
      idx.Store(r, FirstLargest(x, r * cols, cols));
    }
  }
};

// y[i, j] = table[ids[i], j] (ids checked by the caller).
template <class A, typename L>
struct GatherKernel {
  typename A::template In<L> ids;
  typename A::template In<float> table;
  typename A::template Out<float> y;
  int64_t n;  // ids * dim
  int64_t dim;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      y.Store(i, table.Load(AsIndex(ids.Load(i / dim)) * dim + i % dim));
    }
  }
};

// dtable[v, j] = sum over i in order with ids[i] = v of dy[i, j]: the thread owning (v, j)
// scans every id (O(ids) per element; deterministic, no atomics, the CPU's order).
template <class A, typename L>
struct EmbeddingGradKernel {
  typename A::template In<L> ids;
  typename A::template In<float> dy;
  typename A::template Out<float> dtable;
  int64_t count;  // ids
  int64_t n;      // vocab * dim
  int64_t dim;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t e = FirstIndex(t); e < n; e += Stride(t)) {
      const int64_t v = e / dim, j = e % dim;
      float s = 0.f;
      for (int64_t i = 0; i < count; ++i) {
        if (AsIndex(ids.Load(i)) == v) s += dy.Load(i * dim + j);
      }
      dtable.Store(e, s);
    }
  }
};

// y[i] = keep ? x[i] * scale : 0, keep = Philox(key, i / 4)[i % 4] / 2^32 >= rate (in double,
// as DropoutKernel::ForEachKept); one thread per four elements.
template <class A>
struct DropoutKernel {
  uint64_t key;
  double rate;
  float scale;
  typename A::template In<float> x;
  typename A::template Out<float> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const int64_t groups = (n + 3) / 4;
    for (int64_t g = FirstIndex(t); g < groups; g += Stride(t)) {
      const PhiloxWords w = PhiloxGenerate(key, static_cast<uint64_t>(g));
      for (int64_t j = 0; j < 4 && 4 * g + j < n; ++j) {
        const bool keep = w.w[j] * (1.0 / 4294967296.0) >= rate;
        y.Store(4 * g + j, keep ? x.Load(4 * g + j) * scale : 0.f);
      }
    }
  }
};

// ---- attention ----

// dst [parts, batch, heads, time, k] from src [batch * time, parts * heads * k].
template <class A>
struct RowsToHeadsKernel {
  HeadsLayout l;
  typename A::template In<float> src;
  typename A::template Out<float> dst;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const int64_t d = l.heads * l.k;
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      int64_t r = i;
      const int64_t c = r % l.k;
      r /= l.k;
      const int64_t s = r % l.time;
      r /= l.time;
      const int64_t h = r % l.heads;
      r /= l.heads;
      const int64_t b = r % l.batch;
      const int64_t part = r / l.batch;
      dst.Store(i, src.Load((b * l.time + s) * l.parts * d + part * d + h * l.k + c));
    }
  }
};

// The inverse: dst [batch * time, parts * heads * k] from src [parts, batch, heads, time, k].
template <class A>
struct HeadsToRowsKernel {
  HeadsLayout l;
  typename A::template In<float> src;
  typename A::template Out<float> dst;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const int64_t d = l.heads * l.k, width = l.parts * d;
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      const int64_t row = i / width, col = i % width;
      const int64_t b = row / l.time, s = row % l.time;
      const int64_t part = col / d, h = (col % d) / l.k, c = col % l.k;
      dst.Store(i, src.Load((((part * l.batch + b) * l.heads + h) * l.time + s) * l.k + c));
    }
  }
};

// Rows of [time] scores (rows = batch * heads * time; row r is query r % time): softmax over
// the first n = causal ? query + 1 : time as cpu::SoftmaxRow (max, sum of expf(x - max) in
// order, then each divided by the sum), zeros after. One thread per row.
template <class A>
struct AttentionSoftmaxKernel {
  typename A::template In<float> scores;
  typename A::template Out<float> probs;
  int64_t rows;
  int64_t time;
  bool causal;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t r = FirstIndex(t); r < rows; r += Stride(t)) {
      const int64_t base = r * time, valid = causal ? r % time + 1 : time;
      float m = scores.Load(base);
      for (int64_t j = 1; j < valid; ++j) m = Max(m, scores.Load(base + j));
      float s = 0.f;
      for (int64_t j = 0; j < valid; ++j) s += expf(scores.Load(base + j) - m);
      for (int64_t j = 0; j < time; ++j) {
        probs.Store(base + j, j < valid ? expf(scores.Load(base + j) - m) / s : 0.f);
      }
    }
  }
};

// dS = P * (dP - sum_j dP * P) * scale per row (the dot as AddProduct).
template <class A>
struct AttentionSoftmaxGradKernel {
  typename A::template In<float> probs;
  typename A::template In<float> dprobs;
  typename A::template Out<float> dscores;
  int64_t rows;
  int64_t time;
  float scale;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t r = FirstIndex(t); r < rows; r += Stride(t)) {
      const int64_t base = r * time;
      float dot = 0.f;
      for (int64_t j = 0; j < time; ++j) {
        dot = AddProduct(dot, dprobs.Load(base + j), probs.Load(base + j), j, time);
      }
      for (int64_t j = 0; j < time; ++j) {
        dscores.Store(base + j, probs.Load(base + j) * (dprobs.Load(base + j) - dot) * scale);
      }
    }
  }
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_KERNEL_BODIES_SEQ_H_
