// SELF_ATTENTION: (x [b, t, d], w_qkv [d, 3d], w_o [d, d]) -> [b, t, d], multi-head
// scaled dot-product self-attention:
//   [Q K V] = x w_qkv;  per batch row and head h (columns h*k .. h*k+k of each, k = d/heads)
//   O_h = softmax(Q_h K_h^T / sqrt(k), masked to j <= i when `causal`) V_h;  y = [O_h] w_o.
// Every product goes through products.h (cpu::Gemm, in the graph's precision); the forward pass
// keeps QKV, the attention weights and the heads' outputs for the backward pass.
#include <cstring>
#include <limits>

#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"
#include "engine/ops/products.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> SelfAttentionShape(const v1::NodeDef& node,
                                              const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  const Shape &x = in[0].shape, &wqkv = in[1].shape, &wo = in[2].shape;
  if (x.rank() != 3 || x.dim(2) <= 0) {
    return ShapeError(node,
                      absl::StrCat("input ", x.ToString(), " is not [batch, time, features]"));
  }
  const int64_t d = x.dim(2);
  if (node.num_heads() <= 0 || d % node.num_heads() != 0) {
    return ShapeError(node, absl::StrCat("num_heads ", node.num_heads(),
                                         " does not divide the feature size ", d));
  }
  if (wqkv != Shape{d, 3 * d} || wo != Shape{d, d}) {
    return ShapeError(node, absl::StrCat("weights ", wqkv.ToString(), " and ", wo.ToString(),
                                         " are not [", d, ",", 3 * d, "] and [", d, ",", d, "]"));
  }
  return in[0];
}

template <typename T>
class SelfAttentionKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    Dims s = GetDims(in[0].shape());
    qkv_ = probs_ = heads_ = Tensor();  // the last step's go back to the pool first
    qkv_ = ctx.allocate(DTypeOf<T>(), Shape{s.b * s.t, 3 * s.d});
    probs_ = ctx.allocate(DTypeOf<T>(), Shape{s.b, s.heads, s.t, s.t});
    heads_ = ctx.allocate(DTypeOf<T>(), Shape{s.b * s.t, s.d});
    Tensor q = ctx.allocate(DTypeOf<T>(), Shape{3, s.t, s.k});  // one head's Q, K, V
    Tensor o = ctx.allocate(DTypeOf<T>(), Shape{s.t, s.k});
    T *qh = q.data<T>(), *kh = qh + s.t * s.k, *vh = kh + s.t * s.k;
    Product<T>(ctx, false, false, s.b * s.t, 3 * s.d, s.d, T(1), in[0].data<T>(), in[1].data<T>(),
               T(0), qkv_.data<T>());
    const T scale = T(1) / std::sqrt(T(s.k));
    for (int64_t b = 0; b < s.b; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        for (int part = 0; part < 3; ++part) Gather(s, b, h, part, qh + part * s.t * s.k);
        T* p = Probs(s, b, h);
        Product<T>(ctx, false, true, s.t, s.t, s.k, scale, qh, kh, T(0), p);  // scores
        for (int64_t i = 0; i < s.t; ++i) {
          T* row = p + i * s.t;
          const int64_t n = this->node_.causal() ? i + 1 : s.t;
          cpu::SoftmaxRow(row, n, row);
          std::fill(row + n, row + s.t, T(0));
        }
        Product<T>(ctx, false, false, s.t, s.k, s.t, T(1), p, vh, T(0), o.data<T>());
        Scatter(s, o.data<T>(), b, h, heads_.data<T>(), s.d);
      }
    }
    Product<T>(ctx, false, false, s.b * s.t, s.d, s.d, T(1), heads_.data<T>(), in[2].data<T>(),
               T(0), out->data<T>());
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    Dims s = GetDims(in[0].shape());
    const T* dy = d_out.data<T>();
    if (need[2]) {  // dW_o = heads^T dY
      (*d_in)[2] = this->GradientLike(ctx, in, 2);
      Product<T>(ctx, true, false, s.d, s.d, s.b * s.t, T(1), heads_.data<T>(), dy, T(0),
                 (*d_in)[2].data<T>());
      ctx.InputGradientDone(2);
    }
    if (!need[0] && !need[1]) return absl::OkStatus();
    Tensor d_heads = ctx.allocate(DTypeOf<T>(), Shape{s.b * s.t, s.d});
    Product<T>(ctx, false, true, s.b * s.t, s.d, s.d, T(1), dy, in[2].data<T>(), T(0),
               d_heads.data<T>());
    Tensor d_qkv = ctx.allocate(DTypeOf<T>(), Shape{s.b * s.t, 3 * s.d});
    Tensor work = ctx.allocate(DTypeOf<T>(), Shape{7, s.t, std::max(s.t, s.k)});
    const int64_t stride = s.t * std::max(s.t, s.k);
    T *qh = work.data<T>(), *kh = qh + stride, *vh = kh + stride, *dout = vh + stride;
    T *dq = dout + stride, *dk = dq + stride, *dv = dk + stride;
    Tensor dp_t = ctx.allocate(DTypeOf<T>(), Shape{s.t, s.t});
    T* dp = dp_t.data<T>();
    const T scale = T(1) / std::sqrt(T(s.k));
    for (int64_t b = 0; b < s.b; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        Gather(s, b, h, 0, qh);
        Gather(s, b, h, 1, kh);
        Gather(s, b, h, 2, vh);
        for (int64_t i = 0; i < s.t; ++i) {  // this head's dO
          std::memcpy(dout + i * s.k, d_heads.data<T>() + (b * s.t + i) * s.d + h * s.k,
                      s.k * sizeof(T));
        }
        const T* p = Probs(s, b, h);
        Product<T>(ctx, true, false, s.t, s.k, s.t, T(1), p, dout, T(0), dv);   // dV = P^T dO
        Product<T>(ctx, false, true, s.t, s.t, s.k, T(1), dout, vh, T(0), dp);  // dP = dO V^T
        for (int64_t i = 0; i < s.t; ++i) {  // dS = P * (dP - rowsum(dP * P)), scaled
          const T* pr = p + i * s.t;
          T* dr = dp + i * s.t;
          T dot = 0;
          for (int64_t j = 0; j < s.t; ++j) dot += dr[j] * pr[j];
          for (int64_t j = 0; j < s.t; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
        }
        Product<T>(ctx, false, false, s.t, s.k, s.t, T(1), dp, kh, T(0), dq);  // dQ = dS K
        Product<T>(ctx, true, false, s.t, s.k, s.t, T(1), dp, qh, T(0), dk);   // dK = dS^T Q
        Scatter(s, dq, b, h, d_qkv.data<T>(), 3 * s.d);
        Scatter(s, dk, b, h, d_qkv.data<T>() + s.d, 3 * s.d);
        Scatter(s, dv, b, h, d_qkv.data<T>() + 2 * s.d, 3 * s.d);
      }
    }
    if (need[1]) {  // dW_qkv = x^T dQKV
      (*d_in)[1] = this->GradientLike(ctx, in, 1);
      Product<T>(ctx, true, false, s.d, 3 * s.d, s.b * s.t, T(1), in[0].data<T>(), d_qkv.data<T>(),
                 T(0), (*d_in)[1].data<T>());
      ctx.InputGradientDone(1);
    }
    if (need[0]) {  // dX = dQKV W_qkv^T
      (*d_in)[0] = this->GradientLike(ctx, in, 0);
      Product<T>(ctx, false, true, s.b * s.t, s.d, 3 * s.d, T(1), d_qkv.data<T>(), in[1].data<T>(),
                 T(0), (*d_in)[0].data<T>());
    }
    return absl::OkStatus();
  }

 private:
  struct Dims {
    int64_t b, t, d, heads, k;
  };
  Dims GetDims(const Shape& x) const {
    const int64_t heads = this->node_.num_heads();
    return Dims{x.dim(0), x.dim(1), x.dim(2), heads, x.dim(2) / heads};
  }
  T* Probs(const Dims& s, int64_t b, int64_t h) {
    return probs_.data<T>() + (b * s.heads + h) * s.t * s.t;
  }
  // Head h of part (0 Q, 1 K, 2 V) of batch row b, as a contiguous [t, k] matrix.
  void Gather(const Dims& s, int64_t b, int64_t h, int part, T* dst) const {
    const T* src = qkv_.data<T>() + b * s.t * 3 * s.d + part * s.d + h * s.k;
    for (int64_t i = 0; i < s.t; ++i) {
      std::memcpy(dst + i * s.k, src + i * 3 * s.d, s.k * sizeof(T));
    }
  }
  // Writes a head's [t, k] matrix into columns h*k.. of batch row b of a [b*t, ld] matrix.
  static void Scatter(const Dims& s, const T* src, int64_t b, int64_t h, T* dst, int64_t ld) {
    for (int64_t i = 0; i < s.t; ++i) {
      std::memcpy(dst + (b * s.t + i) * ld + h * s.k, src + i * s.k, s.k * sizeof(T));
    }
  }

  // From the last Forward, for Backward.
  Tensor qkv_;    // [b*t, 3d]
  Tensor probs_;  // [b, heads, t, t]
  Tensor heads_;  // [b*t, d], the heads' outputs side by side
};

// SELF_ATTENTION on a GPU: the CPU kernel's products through BlasApi (one GEMM per batch row
// and head, on packed [parts, batch, heads, time, k] head matrices that GpuKernels::RowsToHeads
// lays out) and its softmax through GpuKernels::AttentionSoftmax / AttentionSoftmaxGrad (one
// thread per row, the CPU's arithmetic). Keeps the packed Q, K, V, the attention weights and
// the heads' outputs from the forward pass for the backward pass, as the CPU kernel does.
class SelfAttentionGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                       absl::Span<const Tensor> in, Tensor* out) override {
    const gpu::HeadsLayout l = Layout(in[0].shape(), 3);
    const int64_t rows = l.batch * l.time, d = l.heads * l.k;
    qkv_heads_ = probs_ = heads_ = Tensor();  // the last step's go back to the pool first
    LS_ASSIGN_OR_RETURN(Tensor qkv, Allocate(ctx, DType::kF32, Shape{rows, 3 * d}));
    LS_RETURN_IF_ERROR(
        Product(ctx, gpu, false, false, rows, 3 * d, d, 1.f, F32(in[0]), F32(in[1]), F32(qkv)));
    LS_ASSIGN_OR_RETURN(qkv_heads_, Allocate(ctx, DType::kF32, Shape{l.elements()}));
    LS_RETURN_IF_ERROR(gpu.kernels->RowsToHeads(l, F32(qkv), F32(qkv_heads_), gpu.stream()));
    const Shape scores_shape{l.batch, l.heads, l.time, l.time};
    LS_ASSIGN_OR_RETURN(Tensor scores, Allocate(ctx, DType::kF32, scores_shape));
    LS_ASSIGN_OR_RETURN(probs_, Allocate(ctx, DType::kF32, scores_shape));
    LS_ASSIGN_OR_RETURN(Tensor o,
                        Allocate(ctx, DType::kF32, Shape{l.batch * l.heads * l.time, l.k}));
    const float scale = Scale(l);
    for (int64_t bh = 0; bh < l.batch * l.heads; ++bh) {  // scores = Q K^T / sqrt(k)
      LS_RETURN_IF_ERROR(Product(ctx, gpu, false, true, l.time, l.time, l.k, scale, Head(l, 0, bh),
                                 Head(l, 1, bh), F32(scores) + bh * l.time * l.time));
    }
    LS_RETURN_IF_ERROR(gpu.kernels->AttentionSoftmax(F32(scores), F32(probs_),
                                                     l.batch * l.heads * l.time, l.time,
                                                     node_.causal(), gpu.stream()));
    for (int64_t bh = 0; bh < l.batch * l.heads; ++bh) {  // O = P V
      LS_RETURN_IF_ERROR(Product(ctx, gpu, false, false, l.time, l.k, l.time, 1.f, Probs(l, bh),
                                 Head(l, 2, bh), F32(o) + bh * l.time * l.k));
    }
    LS_ASSIGN_OR_RETURN(heads_, Allocate(ctx, DType::kF32, Shape{rows, d}));
    LS_RETURN_IF_ERROR(gpu.kernels->HeadsToRows(Single(l), F32(o), F32(heads_), gpu.stream()));
    return Product(ctx, gpu, false, false, rows, d, d, 1.f, F32(heads_), F32(in[2]), F32(*out));
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    const gpu::HeadsLayout l = Layout(in[0].shape(), 3);
    const int64_t rows = l.batch * l.time, d = l.heads * l.k, bhs = l.batch * l.heads;
    if (need[2]) {  // dW_o = heads^T dY
      LS_ASSIGN_OR_RETURN((*d_in)[2], GradientLike(ctx, in, 2));
      LS_RETURN_IF_ERROR(Product(ctx, gpu, true, false, d, d, rows, 1.f, F32(heads_), F32(d_out),
                                 F32((*d_in)[2])));
      ctx.InputGradientDone(2);
    }
    if (!need[0] && !need[1]) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN(Tensor d_heads, Allocate(ctx, DType::kF32, Shape{rows, d}));
    LS_RETURN_IF_ERROR(
        Product(ctx, gpu, false, true, rows, d, d, 1.f, F32(d_out), F32(in[2]), F32(d_heads)));
    LS_ASSIGN_OR_RETURN(Tensor d_o, Allocate(ctx, DType::kF32, Shape{bhs * l.time, l.k}));
    LS_RETURN_IF_ERROR(gpu.kernels->RowsToHeads(Single(l), F32(d_heads), F32(d_o), gpu.stream()));
    LS_ASSIGN_OR_RETURN(Tensor d_qkv_heads, Allocate(ctx, DType::kF32, Shape{l.elements()}));
    const Shape scores_shape{l.batch, l.heads, l.time, l.time};
    LS_ASSIGN_OR_RETURN(Tensor d_probs, Allocate(ctx, DType::kF32, scores_shape));
    LS_ASSIGN_OR_RETURN(Tensor d_scores, Allocate(ctx, DType::kF32, scores_shape));
    float* dqkv = F32(d_qkv_heads);
    const int64_t part = bhs * l.time * l.k, head = l.time * l.k, square = l.time * l.time;
    for (int64_t bh = 0; bh < bhs; ++bh) {
      const float* d_o_bh = F32(d_o) + bh * head;
      // dV = P^T dO;  dP = dO V^T
      LS_RETURN_IF_ERROR(Product(ctx, gpu, true, false, l.time, l.k, l.time, 1.f, Probs(l, bh),
                                 d_o_bh, dqkv + 2 * part + bh * head));
      LS_RETURN_IF_ERROR(Product(ctx, gpu, false, true, l.time, l.time, l.k, 1.f, d_o_bh,
                                 Head(l, 2, bh), F32(d_probs) + bh * square));
    }
    // dS = P * (dP - rowsum(dP * P)) / sqrt(k)
    LS_RETURN_IF_ERROR(gpu.kernels->AttentionSoftmaxGrad(
        F32(probs_), F32(d_probs), F32(d_scores), bhs * l.time, l.time, Scale(l), gpu.stream()));
    for (int64_t bh = 0; bh < bhs; ++bh) {  // dQ = dS K;  dK = dS^T Q
      const float* ds = F32(d_scores) + bh * square;
      LS_RETURN_IF_ERROR(Product(ctx, gpu, false, false, l.time, l.k, l.time, 1.f, ds,
                                 Head(l, 1, bh), dqkv + bh * head));
      LS_RETURN_IF_ERROR(Product(ctx, gpu, true, false, l.time, l.k, l.time, 1.f, ds,
                                 Head(l, 0, bh), dqkv + part + bh * head));
    }
    LS_ASSIGN_OR_RETURN(Tensor d_qkv, Allocate(ctx, DType::kF32, Shape{rows, 3 * d}));
    LS_RETURN_IF_ERROR(gpu.kernels->HeadsToRows(l, dqkv, F32(d_qkv), gpu.stream()));
    if (need[1]) {  // dW_qkv = x^T dQKV
      LS_ASSIGN_OR_RETURN((*d_in)[1], GradientLike(ctx, in, 1));
      LS_RETURN_IF_ERROR(Product(ctx, gpu, true, false, d, 3 * d, rows, 1.f, F32(in[0]), F32(d_qkv),
                                 F32((*d_in)[1])));
      ctx.InputGradientDone(1);
    }
    if (need[0]) {  // dX = dQKV W_qkv^T
      LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
      LS_RETURN_IF_ERROR(Product(ctx, gpu, false, true, rows, d, 3 * d, 1.f, F32(d_qkv), F32(in[1]),
                                 F32((*d_in)[0])));
    }
    return absl::OkStatus();
  }

 private:
  gpu::HeadsLayout Layout(const Shape& x, int64_t parts) const {
    gpu::HeadsLayout l;
    l.parts = parts;
    l.batch = x.dim(0);
    l.time = x.dim(1);
    l.heads = node_.num_heads();
    l.k = x.dim(2) / l.heads;
    return l;
  }
  static gpu::HeadsLayout Single(gpu::HeadsLayout l) {
    l.parts = 1;
    return l;
  }
  // 1 / sqrt(k) in f32, as the CPU kernel.
  static float Scale(const gpu::HeadsLayout& l) { return 1.f / std::sqrt(float(l.k)); }
  // Part (0 Q, 1 K, 2 V) of batch-and-head bh, a packed [time, k] matrix.
  const float* Head(const gpu::HeadsLayout& l, int part, int64_t bh) const {
    return F32(qkv_heads_) + (part * l.batch * l.heads + bh) * l.time * l.k;
  }
  const float* Probs(const gpu::HeadsLayout& l, int64_t bh) const {
    return F32(probs_) + bh * l.time * l.time;
  }
  // c [m, n] = alpha op(a) op(b), row-major, in the graph's precision (products.h).
  static absl::Status Product(const KernelContext& ctx, const gpu::GpuDevice& gpu, bool trans_a,
                              bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                              const float* a, const float* b, float* c) {
    gpu::GemmArgs g;
    g.trans_a = trans_a;
    g.trans_b = trans_b;
    g.m = m;
    g.n = n;
    g.k = k;
    g.alpha = alpha;
    g.a = a;
    g.b = b;
    g.c = c;
    return GpuProduct(ctx, gpu, g);
  }

  // From the last Forward, for Backward.
  Tensor qkv_heads_;  // [3, batch, heads, time, k]
  Tensor probs_;      // [batch, heads, time, time]
  Tensor heads_;      // [batch * time, d], the heads' outputs side by side
};

}  // namespace

void RegisterSelfAttention(OpRegistry* r) {
  MustRegister(r, WithCuda<SelfAttentionGpuKernel>(
                      CpuOp<SelfAttentionKernel>(v1::SELF_ATTENTION, 3, SelfAttentionShape)));
}

}  // namespace lockstep::engine
