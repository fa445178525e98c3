// LAYER_NORM: (x [..., c], gamma [c], beta [c]) -> gamma * (x - mean) / sqrt(var + epsilon)
// + beta, mean and variance over the last axis of each row.
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> LayerNormShape(const v1::NodeDef& node,
                                          const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  const Shape& x = in[0].shape;
  if (x.rank() < 1) return ShapeError(node, "needs rank >= 1");
  for (int k = 1; k < 3; ++k) {
    const Shape& p = in[k].shape;
    if (p.rank() != 1 || !DimsCompatible(p.dim(0), x[-1])) {
      return ShapeError(node, absl::StrCat(k == 1 ? "gamma " : "beta ", p.ToString(),
                                           " does not match the last axis of ", x.ToString()));
    }
  }
  if (!(node.epsilon() > 0)) {
    return ShapeError(node, absl::StrCat("epsilon ", node.epsilon(), " must be > 0"));
  }
  return in[0];
}

template <typename T>
class LayerNormKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const T *x = in[0].data<T>(), *gamma = in[1].data<T>(), *beta = in[2].data<T>();
    T* y = out->data<T>();
    const int64_t c = in[0].shape()[-1], rows = c == 0 ? 0 : in[0].num_elements() / c;
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * c;
      T* yr = y + r * c;
      auto [mean, rstd] = Moments(xr, c);
      for (int64_t j = 0; j < c; ++j) yr[j] = gamma[j] * ((xr[j] - mean) * rstd) + beta[j];
    }
    return absl::OkStatus();
  }

  // dbeta = sum dy; dgamma = sum dy * xhat; dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
  // with g = dy * gamma, per row.
  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    const T *x = in[0].data<T>(), *gamma = in[1].data<T>(), *dy = d_out.data<T>();
    const int64_t c = in[0].shape()[-1], rows = c == 0 ? 0 : in[0].num_elements() / c;
    T* dx = nullptr;
    T *dgamma = nullptr, *dbeta = nullptr;
    if (need[0]) dx = ((*d_in)[0] = this->GradientLike(ctx, in, 0)).template data<T>();
    if (need[1]) {
      dgamma = ((*d_in)[1] = this->GradientLike(ctx, in, 1)).template data<T>();
      std::fill(dgamma, dgamma + c, T(0));
    }
    if (need[2]) {
      dbeta = ((*d_in)[2] = this->GradientLike(ctx, in, 2)).template data<T>();
      std::fill(dbeta, dbeta + c, T(0));
    }
    for (int64_t r = 0; r < rows; ++r) {
      const T *xr = x + r * c, *dyr = dy + r * c;
      auto [mean, rstd] = Moments(xr, c);
      T sum_g = 0, sum_gx = 0;
      for (int64_t j = 0; j < c; ++j) {
        const T xhat = (xr[j] - mean) * rstd;
        if (dgamma != nullptr) dgamma[j] += dyr[j] * xhat;
        if (dbeta != nullptr) dbeta[j] += dyr[j];
        sum_g += dyr[j] * gamma[j];
        sum_gx += dyr[j] * gamma[j] * xhat;
      }
      if (dx == nullptr) continue;
      const T mean_g = sum_g / T(c), mean_gx = sum_gx / T(c);
      for (int64_t j = 0; j < c; ++j) {
        const T xhat = (xr[j] - mean) * rstd;
        dx[r * c + j] = rstd * (dyr[j] * gamma[j] - mean_g - xhat * mean_gx);
      }
    }
    return absl::OkStatus();
  }

 private:
  // The row's mean and 1 / sqrt(variance + epsilon).
  std::pair<T, T> Moments(const T* x, int64_t c) const {
    T mean = 0, var = 0;
    for (int64_t j = 0; j < c; ++j) mean += x[j];
    mean /= T(c);
    for (int64_t j = 0; j < c; ++j) var += (x[j] - mean) * (x[j] - mean);
    var /= T(c);
    return {mean, T(1) / std::sqrt(var + T(this->node_.epsilon()))};
  }
};

// LAYER_NORM on a GPU: GpuKernels::LayerNorm (one thread per row) and LayerNormGrad (the rows'
// dx and moments, then dgamma and dbeta one thread per column), the CPU kernel's arithmetic.
class LayerNormGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const auto [rows, c] = RowsAndColumns(in[0]);
    return gpu.kernels->LayerNorm(F32(in[0]), F32(in[1]), F32(in[2]), F32(*out), rows, c, Epsilon(),
                                  gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (!need[0] && !need[1] && !need[2]) return absl::OkStatus();
    const auto [rows, c] = RowsAndColumns(in[0]);
    float* grads[3] = {};
    for (int i = 0; i < 3; ++i) {
      if (!need[i]) continue;
      LS_ASSIGN_OR_RETURN((*d_in)[i], GradientLike(ctx, in, i));
      grads[i] = F32((*d_in)[i]);
    }
    if (rows == 0) {  // no rows: dgamma and dbeta are zeros, as the CPU's
      for (int i = 1; i < 3; ++i) {
        if (grads[i] != nullptr) {
          LS_RETURN_IF_ERROR(gpu.context->Zero(grads[i], c * sizeof(float)));
        }
      }
      return absl::OkStatus();
    }
    LS_ASSIGN_OR_RETURN(Tensor stats, Allocate(ctx, DType::kF32, Shape{rows, 2}));
    return gpu.kernels->LayerNormGrad(F32(in[0]), F32(in[1]), F32(d_out), F32(stats), grads[0],
                                      grads[1], grads[2], rows, c, Epsilon(), gpu.stream());
  }

 private:
  static std::pair<int64_t, int64_t> RowsAndColumns(const Tensor& x) {
    const int64_t c = x.shape()[-1];
    return {c == 0 ? 0 : x.num_elements() / c, c};
  }
  float Epsilon() const { return static_cast<float>(node_.epsilon()); }
};

}  // namespace

void RegisterLayerNorm(OpRegistry* r) {
  MustRegister(
      r, WithCuda<LayerNormGpuKernel>(CpuOp<LayerNormKernel>(v1::LAYER_NORM, 3, LayerNormShape)));
}

}  // namespace lockstep::engine
