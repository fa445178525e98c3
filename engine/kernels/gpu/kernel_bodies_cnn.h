// The convolutional models' kernel bodies, written once (portable.h) like kernel_bodies.h: run by
// a GPU (cuda_kernels_cnn.cu) and by the grid emulator (emulated_kernels_cnn.cc), each mirroring
// a CPU kernel of the engine (engine/kernels/cpu/window_ops.cc, engine/ops/batch_norm.cc) and
// matching it bit for bit: the same operations in the same order, fmaf exactly where GCC fuses
// the CPU loop (-O3 -march=x86-64-v3 contracts a * b + c; listed at each functor, pinned by the
// device-generic tests against the CPU kernels).
//
//   Im2Col          cols[(b, oy, ox), (ky, kx, ci)] = x[b, iy, ix, ci] or 0     CONV2D forward
//   Col2Im          dx[b, iy, ix, ci] = sum over the windows covering it         CONV2D's dX
//   MaxPool         y = the window's first maximum (padding never wins)          MAX_POOL2D
//   MaxPoolGrad     dx[i] = sum of dy over the windows whose maximum is i        its gradient
//   BatchNormStats  per (group, channel): mean, variance, rstd                   BATCH_NORM
//   BatchNormApply  y = fmaf(gamma, (x - mean) * rstd, beta)
//   BatchNormMoving (1 - momentum) * (mean over groups - moving), mean and variance
//   BatchNormSums   per (group, channel): sum dy, sum dy * xhat                  its gradient
//   BatchNormParams dgamma, dbeta: the groups' sums added in group order
//   BatchNormInput  dx
//   SyncBatchNormSum        per channel, f64: sum x, or sum (x - mean)^2        synchronized
//   SyncBatchNormGradSums   per channel, f64: sum dy, sum dy * xhat; dgamma, dbeta  BATCH_NORM
//   SyncBatchNormInput      dx from the global batch's means of dy and dy * xhat
//
// The CPU scatters (col2im, max pooling's gradient) and accumulates per channel down the rows;
// here each output element has one thread that gathers its terms in the CPU's order (the
// windows covering an input position in (oy, ox) order, the rows of a channel in row order),
// so no atomics and the CPU's bits. Per-channel sums run one thread per (group, channel) down
// the rows: exact, but serial in the rows (a block reduction would be faster on a GPU and no
// longer the CPU's bits; that trade is for a measured model to decide). The synchronized
// statistics' partial sums (SyncBatchNorm*) do the same in f64, as the CPU kernel's
// ComputeSynchronized and BackwardSynchronized: the op sums them over the replicas on the host.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_KERNEL_BODIES_CNN_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_KERNEL_BODIES_CNN_H_

#include <math.h>

#include <cstdint>

#include "engine/kernels/gpu/cnn_geometry.h"
#include "engine/kernels/gpu/portable.h"

namespace lockstep::engine::gpu {

// An input position [b, iy, ix, ci] from its flat NHWC index.
struct InputPosition {
  int64_t b, iy, ix, ci;
};
LS_HOST_DEVICE inline InputPosition InputAt(const WindowGeometry& g, int64_t i) {
  InputPosition p;
  p.ci = i % g.c;
  i /= g.c;
  p.ix = i % g.w;
  i /= g.w;
  p.iy = i % g.h;
  p.b = i / g.h;
  return p;
}

// The output positions [lo, hi] (inclusive; empty when lo > hi) along one axis whose window
// covers input coordinate `in`: out * stride + k - pad == in for some k in [0, k_size).
struct OutputRange {
  int64_t lo, hi;
};
LS_HOST_DEVICE inline OutputRange CoveringOutputs(int64_t in, int64_t pad, int64_t k_size,
                                                  int64_t stride, int64_t out_size) {
  const int64_t first = in + pad - k_size + 1;  // smallest out * stride
  OutputRange r;
  r.lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  r.hi = (in + pad) / stride;  // in + pad >= 0
  if (r.hi > out_size - 1) r.hi = out_size - 1;
  return r;
}

// The flat index of the first maximum of output [b, oy, ox, ci]'s window, as cpu::ForEachMax
// scans it (rows, then columns; a strictly greater value replaces), or -1 when the window lies
// wholly in the padding.
template <class In>
LS_HOST_DEVICE int64_t WindowArgmax(const In& x, const WindowGeometry& g, int64_t b, int64_t oy,
                                    int64_t ox, int64_t ci) {
  int64_t best = -1;
  float best_value = -INFINITY;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    const int64_t iy = oy * g.sh + ky - g.pad_top;
    if (iy < 0 || iy >= g.h) continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      const int64_t ix = ox * g.sw + kx - g.pad_left;
      if (ix < 0 || ix >= g.w) continue;
      const int64_t idx = ((b * g.h + iy) * g.w + ix) * g.c + ci;
      const float v = x.Load(idx);
      if (best < 0 || v > best_value) {
        best = idx;
        best_value = v;
      }
    }
  }
  return best;
}

template <class A>
struct Im2ColKernel {
  typename A::template In<float> x;
  typename A::template Out<float> cols;
  WindowGeometry g;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const int64_t n = g.rows() * g.cols();
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      int64_t k = i;
      const int64_t ci = k % g.c;
      k /= g.c;
      const int64_t kx = k % g.kw;
      k /= g.kw;
      const int64_t ky = k % g.kh;
      k /= g.kh;
      const int64_t ox = k % g.ow;
      k /= g.ow;
      const int64_t oy = k % g.oh;
      const int64_t b = k / g.oh;
      const int64_t iy = oy * g.sh + ky - g.pad_top, ix = ox * g.sw + kx - g.pad_left;
      const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
      cols.Store(i, inside ? x.Load(((b * g.h + iy) * g.w + ix) * g.c + ci) : 0.f);
    }
  }
};

// dx = 0 + the column entries of every window covering the position, windows in (oy, ox)
// order: cpu::Col2Im's additions into that element, in its order.
template <class A>
struct Col2ImKernel {
  typename A::template In<float> cols;
  typename A::template Out<float> dx;
  WindowGeometry g;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const int64_t n = g.input_size(), width = g.cols();
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      const InputPosition p = InputAt(g, i);
      const OutputRange ys = CoveringOutputs(p.iy, g.pad_top, g.kh, g.sh, g.oh);
      const OutputRange xs = CoveringOutputs(p.ix, g.pad_left, g.kw, g.sw, g.ow);
      float s = 0.f;
      for (int64_t oy = ys.lo; oy <= ys.hi; ++oy) {
        const int64_t ky = p.iy + g.pad_top - oy * g.sh;
        for (int64_t ox = xs.lo; ox <= xs.hi; ++ox) {
          const int64_t kx = p.ix + g.pad_left - ox * g.sw;
          const int64_t row = (p.b * g.oh + oy) * g.ow + ox;
          s += cols.Load(row * width + (ky * g.kw + kx) * g.c + p.ci);
        }
      }
      dx.Store(i, s);
    }
  }
};

template <class A>
struct MaxPoolKernel {
  typename A::template In<float> x;
  typename A::template Out<float> y;
  WindowGeometry g;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const int64_t n = g.pooled_size();
    for (int64_t o = FirstIndex(t); o < n; o += Stride(t)) {
      int64_t k = o;
      const int64_t ci = k % g.c;
      k /= g.c;
      const int64_t ox = k % g.ow;
      k /= g.ow;
      const int64_t oy = k % g.oh;
      const int64_t b = k / g.oh;
      const int64_t best = WindowArgmax(x, g, b, oy, ox, ci);
      y.Store(o, best < 0 ? 0.f : x.Load(best));
    }
  }
};

// dx[i] = 0 + dy of every window covering i whose first maximum is i, in (oy, ox) order: the
// order in which cpu::MaxPoolGrad adds into dx[i].
template <class A>
struct MaxPoolGradKernel {
  typename A::template In<float> x;
  typename A::template In<float> dy;
  typename A::template Out<float> dx;
  WindowGeometry g;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const int64_t n = g.input_size();
    for (int64_t i = FirstIndex(t); i < n; i += Stride(t)) {
      const InputPosition p = InputAt(g, i);
      const OutputRange ys = CoveringOutputs(p.iy, g.pad_top, g.kh, g.sh, g.oh);
      const OutputRange xs = CoveringOutputs(p.ix, g.pad_left, g.kw, g.sw, g.ow);
      float s = 0.f;
      for (int64_t oy = ys.lo; oy <= ys.hi; ++oy) {
        for (int64_t ox = xs.lo; ox <= xs.hi; ++ox) {
          if (WindowArgmax(x, g, p.b, oy, ox, p.ci) != i) continue;
          s += dy.Load(((p.b * g.oh + oy) * g.ow + ox) * g.c + p.ci);
        }
      }
      dx.Store(i, s);
    }
  }
};

// stats [groups, 3, c]: per group and channel the mean, the biased variance and
// 1 / sqrtf(variance + eps) (IEEE sqrt and division), in training of the group's rows:
//   mean = (0 + x_0 + x_1 + ...) / n;  var = fmaf(d, d, var) down the rows / n   (fused by GCC)
// otherwise the moving mean and variance (then one group).
template <class A>
struct BatchNormStatsKernel {
  typename A::template In<float> x;
  typename A::template In<float> moving_mean;
  typename A::template In<float> moving_variance;
  typename A::template Out<float> stats;
  BatchNormDims d;
  bool training;
  float epsilon;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < d.groups * d.c; i += Stride(t)) {
      const int64_t g = i / d.c, j = i % d.c;
      float mean, var;
      if (training) {
        const float n = d.Count(g);
        mean = 0.f;
        for (int64_t r = d.Begin(g); r < d.End(g); ++r) mean += x.Load(r * d.c + j);
        mean /= n;
        var = 0.f;
        for (int64_t r = d.Begin(g); r < d.End(g); ++r) {
          const float dev = x.Load(r * d.c + j) - mean;
          var = fmaf(dev, dev, var);
        }
        var /= n;
      } else {
        mean = moving_mean.Load(j);
        var = moving_variance.Load(j);
      }
      stats.Store((g * 3 + 0) * d.c + j, mean);
      stats.Store((g * 3 + 1) * d.c + j, var);
      stats.Store((g * 3 + 2) * d.c + j, 1.f / sqrtf(var + epsilon));
    }
  }
};

// y = fmaf(gamma, (x - mean) * rstd, beta) with the row's group's statistics (fused by GCC).
template <class A>
struct BatchNormApplyKernel {
  typename A::template In<float> x;
  typename A::template In<float> gamma;
  typename A::template In<float> beta;
  typename A::template In<float> stats;
  typename A::template Out<float> y;
  BatchNormDims d;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < d.rows * d.c; i += Stride(t)) {
      const int64_t j = i % d.c, g = d.GroupOf(i / d.c);
      const float mean = stats.Load((g * 3 + 0) * d.c + j);
      const float rstd = stats.Load((g * 3 + 2) * d.c + j);
      y.Store(i, fmaf(gamma.Load(j), (x.Load(i) - mean) * rstd, beta.Load(j)));
    }
  }
};

// The moving statistics' deltas: (1 - momentum) * ((0 + group 0's + group 1's ...) / groups -
// moving), for the mean and the variance.
template <class A>
struct BatchNormMovingKernel {
  typename A::template In<float> stats;
  typename A::template In<float> moving_mean;
  typename A::template In<float> moving_variance;
  typename A::template Out<float> delta_mean;
  typename A::template Out<float> delta_variance;
  BatchNormDims d;
  float momentum;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    const float rate = 1.f - momentum, groups = float(d.groups);
    for (int64_t j = FirstIndex(t); j < d.c; j += Stride(t)) {
      float sum_mean = 0.f, sum_var = 0.f;
      for (int64_t g = 0; g < d.groups; ++g) {
        sum_mean += stats.Load((g * 3 + 0) * d.c + j);
        sum_var += stats.Load((g * 3 + 1) * d.c + j);
      }
      delta_mean.Store(j, rate * (sum_mean / groups - moving_mean.Load(j)));
      delta_variance.Store(j, rate * (sum_var / groups - moving_variance.Load(j)));
    }
  }
};

// sums [groups, 2, c]: per group and channel, down the rows,
//   sum dy;  sum dy * xhat = fmaf(dy * (x - mean), rstd, sum)      (fused by GCC)
template <class A>
struct BatchNormSumsKernel {
  typename A::template In<float> x;
  typename A::template In<float> dy;
  typename A::template In<float> stats;
  typename A::template Out<float> sums;
  BatchNormDims d;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < d.groups * d.c; i += Stride(t)) {
      const int64_t g = i / d.c, j = i % d.c;
      const float mean = stats.Load((g * 3 + 0) * d.c + j);
      const float rstd = stats.Load((g * 3 + 2) * d.c + j);
      float sum_dy = 0.f, sum_dyx = 0.f;
      for (int64_t r = d.Begin(g); r < d.End(g); ++r) {
        const float v = dy.Load(r * d.c + j);
        sum_dy += v;
        sum_dyx = fmaf(v * (x.Load(r * d.c + j) - mean), rstd, sum_dyx);
      }
      sums.Store((g * 2 + 0) * d.c + j, sum_dy);
      sums.Store((g * 2 + 1) * d.c + j, sum_dyx);
    }
  }
};

// dgamma = 0 + the groups' sums of dy * xhat, dbeta = 0 + their sums of dy, in group order.
template <class A>
struct BatchNormParamsKernel {
  typename A::template In<float> sums;
  typename A::template Out<float> d_gamma;
  typename A::template Out<float> d_beta;
  BatchNormDims d;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t j = FirstIndex(t); j < d.c; j += Stride(t)) {
      float total_dy = 0.f, total_dyx = 0.f;
      for (int64_t g = 0; g < d.groups; ++g) {
        total_dy += sums.Load((g * 2 + 0) * d.c + j);
        total_dyx += sums.Load((g * 2 + 1) * d.c + j);
      }
      d_gamma.Store(j, total_dyx);
      d_beta.Store(j, total_dy);
    }
  }
};

// dx with the row's group's statistics and sums:
//   training   rstd * fmaf(dy, gamma, -(gamma * fmaf(xhat, sum_dyx, sum_dy) / n)),
//              xhat = (x - mean) * rstd       (the CPU's rstd * (dy * gamma - ...), fused by GCC)
//   inference  rstd * (dy * gamma)
template <class A>
struct BatchNormInputKernel {
  typename A::template In<float> x;
  typename A::template In<float> dy;
  typename A::template In<float> gamma;
  typename A::template In<float> stats;
  typename A::template In<float> sums;
  typename A::template Out<float> dx;
  BatchNormDims d;
  bool training;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < d.rows * d.c; i += Stride(t)) {
      const int64_t j = i % d.c, g = d.GroupOf(i / d.c);
      const float gam = gamma.Load(j), v = dy.Load(i);
      const float rstd = stats.Load((g * 3 + 2) * d.c + j);
      if (!training) {
        dx.Store(i, rstd * (v * gam));
        continue;
      }
      const float xhat = (x.Load(i) - stats.Load((g * 3 + 0) * d.c + j)) * rstd;
      const float sum_dy = sums.Load((g * 2 + 0) * d.c + j);
      const float sum_dyx = sums.Load((g * 2 + 1) * d.c + j);
      dx.Store(i, rstd * fmaf(v, gam, -(gam * fmaf(xhat, sum_dyx, sum_dy) / d.Count(g))));
    }
  }
};

// Synchronized batch norm's partial sums (engine/ops/batch_norm.cc, ComputeSynchronized), per
// channel j of this replica's `rows` rows of x [rows, c] (0 rows: a phantom batch, all zeros),
// in f64 down the rows as the CPU adds them:
//   mean absent   sums[j] = 0 + x_0j + x_1j + ...                 (each x widened, exact)
//   mean [c]      sums[j] = fma(d, d, sums[j]) down the rows, d = x - mean[j]  (fused by GCC)
template <class A>
struct SyncBatchNormSumKernel {
  typename A::template In<float> x;
  typename A::template In<double> mean;  // read only when `deviations`
  typename A::template Out<double> sums;
  int64_t rows, c;
  bool deviations;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t j = FirstIndex(t); j < c; j += Stride(t)) {
      double s = 0.0;
      if (deviations) {
        const double m = mean.Load(j);
        for (int64_t r = 0; r < rows; ++r) {
          const double d = double(x.Load(r * c + j)) - m;
          s = fma(d, d, s);
        }
      } else {
        for (int64_t r = 0; r < rows; ++r) s += double(x.Load(r * c + j));
      }
      sums.Store(j, s);
    }
  }
};

// The gradient's partial sums (BackwardSynchronized), per channel down this replica's rows,
// with stats [3, c] (the global batch's mean, variance, rstd):
//   sums [2, c]  sum dy;  sum double(dy * xhat), xhat = (x - mean) * rstd, the product in f32
//   d_gamma = float(sum dy * xhat), d_beta = float(sum dy): this replica's share
template <class A>
struct SyncBatchNormGradSumsKernel {
  typename A::template In<float> x;
  typename A::template In<float> dy;
  typename A::template In<float> stats;
  typename A::template Out<double> sums;
  typename A::template Out<float> d_gamma;
  typename A::template Out<float> d_beta;
  int64_t rows, c;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t j = FirstIndex(t); j < c; j += Stride(t)) {
      const float mean = stats.Load(j), rstd = stats.Load(2 * c + j);
      double sum_dy = 0.0, sum_dyx = 0.0;
      for (int64_t r = 0; r < rows; ++r) {
        const float v = dy.Load(r * c + j);
        sum_dy += double(v);
        sum_dyx += double(v * ((x.Load(r * c + j) - mean) * rstd));
      }
      sums.Store(j, sum_dy);
      sums.Store(c + j, sum_dyx);
      d_gamma.Store(j, float(sum_dyx));
      d_beta.Store(j, float(sum_dy));
    }
  }
};

// dx [rows, c] = rstd * fmaf(dy, gamma, -(gamma * fmaf(xhat, mean_dyx, mean_dy))), xhat =
// (x - mean) * rstd, with stats [3, c] and means [2, c] (mean dy, mean dy * xhat over the
// global batch): the CPU's rstd * (dy * gamma - gamma * (mean_dy + xhat * mean_dyx)), fused
// by GCC.
template <class A>
struct SyncBatchNormInputKernel {
  typename A::template In<float> x;
  typename A::template In<float> dy;
  typename A::template In<float> gamma;
  typename A::template In<float> stats;
  typename A::template In<float> means;
  typename A::template Out<float> dx;
  int64_t rows, c;
  LS_HOST_DEVICE void operator()(const ThreadIndex& t) const {
    for (int64_t i = FirstIndex(t); i < rows * c; i += Stride(t)) {
      const int64_t j = i % c;
      const float gam = gamma.Load(j), rstd = stats.Load(2 * c + j);
      const float xhat = (x.Load(i) - stats.Load(j)) * rstd;
      const float inner = fmaf(xhat, means.Load(c + j), means.Load(j));
      dx.Store(i, rstd * fmaf(dy.Load(i), gam, -(gam * inner)));
    }
  }
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_KERNEL_BODIES_CNN_H_
