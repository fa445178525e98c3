// The GPU device's f32 kernel bodies, written once (portable.h): each a functor over an
// Access policy A, run by a GPU (cuda_kernels.cu) and by the grid emulator
// (emulated_kernels.cc). Each mirrors a CPU computation of the engine and matches it bit for
// bit where the math is exact: the same operations in the same order, fmaf exactly where GCC
// fuses the CPU loop (-O3 -march=x86-64-v3 contracts a * b + c; the fusions are listed at
// each functor and pinned by the tests against the CPU code).
//
//   Axpy        y = fmaf(a, x, y)                         SGD's w -= lr * g (a = -lr)
//   Scale       y = x * s                                 MEAN's gradient, averaging
//   Add         y = a + b                                 ADD
//   Relu        y = x > 0 ? x : 0                         RELU forward
//   ReluGrad    dx = x > 0 ? dy : 0                       RELU gradient
//   SoftmaxRows y = exp(x - max) / sum                    SOFTMAX over the last axis
//   RowSum      y[r] = sum of row r                       SUM over the last axis
//   Momentum    fused decay, clipping scale and (Nesterov) momentum      Optimizer::Apply
//   Adam        fused decay, clipping scale and Adam                     Optimizer::Apply
//   BiasAdd     y[r, j] = x[r, j] + b[j]                  BIAS_ADD forward
//   ColumnSum   y[j] = sum over rows r in order of x[r, j] BIAS_ADD's bias gradient
//   XentRows / XentTotal   per-row terms, then their sum  SPARSE_SOFTMAX_CROSS_ENTROPY forward
//   XentGrad    (softmax - smoothed one-hot) * dy / rows   its gradient
//   ArgmaxHits / HitRate   per-row hit, then the fraction ACCURACY
//   LabelCheck  bad = 1 + the first row whose label is outside [0, cols), else 0
//   CastToBFloat16  y = FloatToBFloat16(x) (common/bfloat16.h)  BF16_MIXED products' operands,
//                   BF16 compression's narrowing of gradients over NCCL
//   CastFromBFloat16 y = BFloat16ToFloat(x) (exact)          BF16 compression's widening
//   SumSquares / ClipScale   f64 partial sums of x^2, then norm and clip scale  global_clipnorm
//   ScaleByDevice  y = x * (*s), s a device float           SGD's clipped gradient
// The loss and accuracy kernels clamp a label into [0, cols) before they index with it (an
// out-of-range label reads no memory outside the logits); LabelCheck reports it, and the
// caller fails the step. They run one thread per row (rows are few, classes fewer than a
// block): each row in the CPU's order, so the emulator gives the CPU kernel's bits.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_KERNEL_BODIES_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_KERNEL_BODIES_H_

#include <math.h>

#include <cstdint>

#include "common/bfloat16.h"
#include "engine/kernels/gpu/block_reduce.h"
#include "engine/kernels/gpu/optimizer_params.h"
#include "engine/kernels/gpu/portable.h"

namespace lockstep::engine::gpu {

template <class A>
struct AxpyKernel {
  float a;
  typename A::template In<float> x;
  typename A::template Out<float> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t))
      y.Store(i, fmaf(a, x.Load(i), y.Load(i)));
  }
};

// The operands of BF16_MIXED products: the one bf16 rounding every layer uses.
template <class A>
struct CastToBFloat16Kernel {
  typename A::template In<float> x;
  typename A::template Out<uint16_t> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) y.Store(i, FloatToBFloat16(x.Load(i)));
  }
};

// BF16 compression's widening of all-reduced gradients: exact (the top 16 bits of an f32),
// the device side of collectives' BFloat16ToFloats.
template <class A>
struct CastFromBFloat16Kernel {
  typename A::template In<uint16_t> x;
  typename A::template Out<float> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) y.Store(i, BFloat16ToFloat(x.Load(i)));
  }
};

template <class A>
struct ScaleKernel {
  typename A::template In<float> x;
  float s;
  typename A::template Out<float> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) y.Store(i, x.Load(i) * s);
  }
};

template <class A>
struct AddKernel {
  typename A::template In<float> a;
  typename A::template In<float> b;
  typename A::template Out<float> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) y.Store(i, a.Load(i) + b.Load(i));
  }
};

template <class A>
struct ReluKernel {
  typename A::template In<float> x;
  typename A::template Out<float> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      const float v = x.Load(i);
      y.Store(i, v > 0.f ? v : 0.f);
    }
  }
};

template <class A>
struct ReluGradKernel {
  typename A::template In<float> x;
  typename A::template In<float> dy;
  typename A::template Out<float> dx;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      dx.Store(i, x.Load(i) > 0.f ? dy.Load(i) : 0.f);
    }
  }
};

// One block per row: the row's max and sum through the block API. exp is expf (the CPU's
// std::exp on floats; CUDA's expf is within 2 ulp of it) and the sum's order is the block's,
// so rows match the CPU within a tolerance (SoftmaxRowsTolerance in the tests).
template <class A>
struct SoftmaxRowsKernel {
  typename A::template In<float> x;
  typename A::template Out<float> y;
  int64_t rows;
  int64_t cols;
  template <class Block>
  LS_HOST_DEVICE void operator()(const ThreadIndex& t, Block& block) const {
    for (int64_t r = FirstRow(t); r < rows; r += RowStride(t)) {
      const int64_t base = r * cols;
      float m = -INFINITY;
      for (int64_t j = t.thread; j < cols; j += t.block_dim) m = Max(m, x.Load(base + j));
      m = BlockMax(t, block, m);
      float s = 0.f;
      for (int64_t j = t.thread; j < cols; j += t.block_dim) s += expf(x.Load(base + j) - m);
      s = BlockSum(t, block, s);
      for (int64_t j = t.thread; j < cols; j += t.block_dim) {
        y.Store(base + j, expf(x.Load(base + j) - m) / s);
      }
    }
  }
};

// One block per row; thread 0 writes the row's sum. Exact (equal to the CPU's sequential sum)
// when every partial sum is exact, e.g. small integers; otherwise within rounding.
template <class A>
struct RowSumKernel {
  typename A::template In<float> x;
  typename A::template Out<float> y;
  int64_t rows;
  int64_t cols;
  template <class Block>
  LS_HOST_DEVICE void operator()(const ThreadIndex& t, Block& block) const {
    for (int64_t r = FirstRow(t); r < rows; r += RowStride(t)) {
      float s = 0.f;
      for (int64_t j = t.thread; j < cols; j += t.block_dim) s += x.Load(r * cols + j);
      s = BlockSum(t, block, s);
      if (t.thread == 0) y.Store(r, s);
    }
  }
};

// Optimizer::Update<float> for Momentum, fused, element by element in the CPU's order:
//   decay    w = fmaf(-decay, w, w)                  (w -= decay * w, fused by GCC)
//   clip     g = g * grad_scale
//   velocity v = fmaf(mu, v, -(rate * g))             (mu * v - rate * g, fused by GCC)
//   weight   w = w + v,  Nesterov: w = w + fmaf(mu, v, -(rate * g))
// The clipping scale of an update: from the device (ClipScale's output) when given.
template <class Params>
LS_HOST_DEVICE float GradientScale(const Params& p) {
  return p.device_gradient_scale != nullptr ? *p.device_gradient_scale : p.gradient_scale;
}

// Global-norm clipping, step 1, one launch per gradient: partials[p] (p < kNormPartials) is
// the f64 sum of x[i]^2 over the p-th of kNormPartials equal chunks of x, summed by block
// (thread-strided, then BlockSumF64). A square of a float is exact in double, so the only
// roundings are the additions: their order is fixed by the block size (reproducible run to
// run) but is not the CPU's sequential order (Optimizer::GlobalNorm). kNormPartials:
// optimizer_params.h.

template <class A>
struct SumSquaresKernel {
  typename A::template In<float> x;
  typename A::template Out<double> partials;  // kNormPartials
  int64_t n;
  template <class Block>
  LS_HOST_DEVICE void operator()(const ThreadIndex& t, Block& block) const {
    const int64_t chunk = (n + kNormPartials - 1) / kNormPartials;
    for (int64_t p = FirstRow(t); p < kNormPartials; p += RowStride(t)) {  // uniform per block
      const int64_t begin = p * chunk;
      const int64_t end = begin + chunk < n ? begin + chunk : n;
      double sum = 0;
      for (int64_t i = begin + t.thread; i < end; i += t.block_dim) {
        const double v = x.Load(i);
        sum += v * v;
      }
      sum = BlockSumF64(t, block, sum);
      if (t.thread == 0) partials.Store(p, sum);
    }
  }
};

// Step 2, one block: norm = sqrt(sum of the `count` partials), and the scale every gradient
// is multiplied by: (float)(clipnorm / norm) when norm > clipnorm, else 1 (as
// Optimizer::Apply: a NaN norm does not clip). Multiplying by 1.0f changes no bits, so the
// update kernels apply it unconditionally.
template <class A>
struct ClipScaleKernel {
  typename A::template In<double> partials;
  int64_t count;
  double clipnorm;
  typename A::template Out<double> norm;  // 1
  typename A::template Out<float> scale;  // 1
  template <class Block>
  LS_HOST_DEVICE void operator()(const ThreadIndex& t, Block& block) const {
    double sum = 0;
    for (int64_t i = t.thread; i < count; i += t.block_dim) sum += partials.Load(i);
    sum = BlockSumF64(t, block, sum);
    if (t.thread == 0) {
      const double nrm = sqrt(sum);
      norm.Store(0, nrm);
      scale.Store(0, nrm > clipnorm ? static_cast<float>(clipnorm / nrm) : 1.f);
    }
  }
};

// y = x * (*s): SGD's clipped gradient, the scale on the device.
template <class A>
struct ScaleByDeviceKernel {
  typename A::template In<float> x;
  typename A::template In<float> s;  // 1
  typename A::template Out<float> y;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const float c = s.Load(0);
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) y.Store(i, x.Load(i) * c);
  }
};

template <class A>
struct MomentumKernel {
  MomentumParams p;
  typename A::template In<float> g;
  typename A::template Out<float> v;
  typename A::template Out<float> w;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      float wi = w.Load(i);
      if (p.decay) wi = fmaf(-p.decay_rate, wi, wi);
      float gi = g.Load(i);
      if (p.scale_gradient) gi = gi * GradientScale(p);
      const float vi = fmaf(p.momentum, v.Load(i), -(p.rate * gi));
      v.Store(i, vi);
      w.Store(i, p.nesterov ? wi + fmaf(p.momentum, vi, -(p.rate * gi)) : wi + vi);
    }
  }
};

// Optimizer::Update<float> for Adam, fused:
//   decay  w = fmaf(-decay, w, w)
//   clip   g = g * grad_scale
//   m = fmaf(b1, m, (1 - b1) * g);  s = fmaf(b2, s, ((1 - b2) * g) * g)     (fused by GCC)
//   w = w - (step * m) / (sqrtf(s) + eps)                                     (IEEE sqrt, div)
template <class A>
struct AdamKernel {
  AdamParams p;
  typename A::template In<float> g;
  typename A::template Out<float> m;
  typename A::template Out<float> s;
  typename A::template Out<float> w;
  int64_t n;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const float one_minus_b1 = 1.f - p.beta1, one_minus_b2 = 1.f - p.beta2;
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      float wi = w.Load(i);
      if (p.decay) wi = fmaf(-p.decay_rate, wi, wi);
      float gi = g.Load(i);
      if (p.scale_gradient) gi = gi * GradientScale(p);
      const float mi = fmaf(p.beta1, m.Load(i), one_minus_b1 * gi);
      const float si = fmaf(p.beta2, s.Load(i), (one_minus_b2 * gi) * gi);
      m.Store(i, mi);
      s.Store(i, si);
      w.Store(i, wi - (p.step * mi) / (sqrtf(si) + p.epsilon));
    }
  }
};

template <class A>
struct BiasAddKernel {
  typename A::template In<float> x;
  typename A::template In<float> b;
  typename A::template Out<float> y;
  int64_t n;     // x's elements
  int64_t cols;  // b's elements (> 0)
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) y.Store(i, x.Load(i) + b.Load(i % cols));
  }
};

// One thread per column, summing down the rows from 0 in row order, as the CPU does. A
// column's sum is one chain of adds, and the MLP's bias gradients have few columns for many
// rows ([4096, 8192]: 8192 threads, 32 blocks; [4096, 10]: 10 threads), so what feeds the
// memory system is the loads each thread has in flight: the rows are loaded kBatch at a time,
// all issued before the batch is added, in order (the same adds in the same order: the CPU's
// bits). Without the batches each thread waited on about one load at a time.
template <class A>
struct ColumnSumKernel {
  static constexpr int kBatch = 16;
  typename A::template In<float> x;
  typename A::template Out<float> y;
  int64_t rows;
  int64_t cols;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t j = FirstIndex(t); j < cols; j += Stride(t)) {
      float s = 0.f;
      int64_t r = 0;
      for (; r + kBatch <= rows; r += kBatch) {
        float v[kBatch];
        for (int i = 0; i < kBatch; ++i) v[i] = x.Load((r + i) * cols + j);
        for (int i = 0; i < kBatch; ++i) s += v[i];
      }
      for (; r < rows; ++r) s += x.Load(r * cols + j);
      y.Store(j, s);
    }
  }
};

// A label as an index into a row of `cols`, clamped into [0, cols) (LabelCheck reports the
// labels that needed it).
template <typename L>
LS_HOST_DEVICE int64_t ClampedLabel(L label, int64_t cols) {
  const int64_t l = static_cast<int64_t>(label);
  return l < 0 ? 0 : (l >= cols ? cols - 1 : l);
}

// One thread: bad[0] = 1 + the first row whose label is outside [0, cols), 0 when none. It
// always writes, so the flag needs no clearing between steps.
template <class A, typename L>
struct LabelCheckKernel {
  typename A::template In<L> labels;
  typename A::template Out<int64_t> bad;
  int64_t rows;
  int64_t cols;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    if (FirstIndex(t) != 0) return;
    int64_t first = 0;
    for (int64_t r = 0; r < rows && first == 0; ++r) {
      const int64_t l = static_cast<int64_t>(labels.Load(r));
      if (l < 0 || l >= cols) first = r + 1;
    }
    bad.Store(0, first);
  }
};

// Row r's share of the mean cross-entropy, in double as the CPU computes it:
//   log(sum_j exp(x_j - m)) + m - (1 - eps) x_label - eps / c * sum_j x_j
template <class A, typename L>
struct XentRowsKernel {
  typename A::template In<float> x;
  typename A::template In<L> labels;
  typename A::template Out<double> terms;
  int64_t rows;
  int64_t cols;
  double eps;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t r = FirstIndex(t); r < rows; r += Stride(t)) {
      const int64_t base = r * cols;
      float m = x.Load(base);
      for (int64_t j = 1; j < cols; ++j) m = Max(m, x.Load(base + j));
      double s = 0, sum = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const float v = x.Load(base + j);
        s += exp(double(v - m));
        sum += v;
      }
      double term = log(s) + m - (1 - eps) * x.Load(base + ClampedLabel(labels.Load(r), cols));
      if (eps != 0) term -= eps / cols * sum;
      terms.Store(r, term);
    }
  }
};

// One thread: loss = (float)(sum of the rows' terms in row order / rows), 0 without rows.
template <class A>
struct XentTotalKernel {
  typename A::template In<double> terms;
  typename A::template Out<float> loss;
  int64_t rows;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    if (FirstIndex(t) != 0) return;
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) total += terms.Load(r);
    loss.Store(0, rows == 0 ? 0.f : float(total / rows));
  }
};

// d logits = (softmax(x) - ((1 - eps) one_hot + eps / c)) * dy / rows, row by row in the CPU's
// order (cpu::SoftmaxRow, then the target subtracted, then the scale).
template <class A, typename L>
struct XentGradKernel {
  typename A::template In<float> x;
  typename A::template In<L> labels;
  typename A::template In<float> dy;  // the loss's gradient, one element
  typename A::template Out<float> gx;
  int64_t rows;
  int64_t cols;
  float eps;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const float scale = rows == 0 ? 0.f : dy.Load(0) / float(rows);
    const float spread = cols == 0 ? 0.f : eps / float(cols);
    for (int64_t r = FirstIndex(t); r < rows; r += Stride(t)) {
      const int64_t base = r * cols;
      const int64_t label = ClampedLabel(labels.Load(r), cols);
      float m = x.Load(base);
      for (int64_t j = 1; j < cols; ++j) m = Max(m, x.Load(base + j));
      float s = 0.f;
      for (int64_t j = 0; j < cols; ++j) s += expf(x.Load(base + j) - m);
      for (int64_t j = 0; j < cols; ++j) {
        float g = expf(x.Load(base + j) - m) / s;
        if (j == label) g -= 1.f - eps;
        if (eps != 0.f) g -= spread;
        gx.Store(base + j, g * scale);
      }
    }
  }
};

// The first j in [0, cols) with the largest x[base + j] (std::max_element's choice).
template <class In>
LS_HOST_DEVICE int64_t FirstLargest(const In& x, int64_t base, int64_t cols) {
  int64_t best = 0;
  float m = x.Load(base);
  for (int64_t j = 1; j < cols; ++j) {
    const float v = x.Load(base + j);
    if (m < v) {
      m = v;
      best = j;
    }
  }
  return best;
}

// hits[r] = 1 when row r's first largest logit is its label's.
template <class A, typename L>
struct ArgmaxHitsKernel {
  typename A::template In<float> x;
  typename A::template In<L> labels;
  typename A::template Out<int32_t> hits;
  int64_t rows;
  int64_t cols;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t r = FirstIndex(t); r < rows; r += Stride(t)) {
      hits.Store(r,
                 FirstLargest(x, r * cols, cols) == static_cast<int64_t>(labels.Load(r)) ? 1 : 0);
    }
  }
};

// One thread: rate = (float)hits / (float)rows, 0 without rows.
template <class A>
struct HitRateKernel {
  typename A::template In<int32_t> hits;
  typename A::template Out<float> rate;
  int64_t rows;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    if (FirstIndex(t) != 0) return;
    int64_t correct = 0;
    for (int64_t r = 0; r < rows; ++r) correct += hits.Load(r);
    rate.Store(0, rows == 0 ? 0.f : float(correct) / float(rows));
  }
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_KERNEL_BODIES_H_
