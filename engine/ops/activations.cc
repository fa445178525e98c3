// RELU, SIGMOID, TANH, GELU (exact: x * Phi(x), Phi the standard normal CDF): element-wise
// activations, output shaped like the input. GELU in f32 is cpu::GeluForward/GeluBackward
// (AVX2 lanes with polynomial erf and exp).
#include <type_traits>

#include "engine/kernels/cpu/vector_math.h"
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> SameAsInput(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  return in[0];
}

template <typename T>
class ActivationKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const T* x = in[0].data<T>();
    T* y = out->data<T>();
    const int64_t n = in[0].num_elements();
    switch (this->node_.op()) {
      case v1::RELU:
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
        break;
      case v1::SIGMOID:
        for (int64_t i = 0; i < n; ++i) y[i] = T(1) / (T(1) + std::exp(-x[i]));
        break;
      case v1::GELU:
        if constexpr (std::is_same_v<T, float>) {
          cpu::GeluForward(x, y, n);
        } else {
          for (int64_t i = 0; i < n; ++i) y[i] = x[i] * Phi(x[i]);
        }
        break;
      default:  // TANH
        for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
        break;
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor& out,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    Tensor g = this->GradientLike(ctx, in, 0);
    T* gx = g.data<T>();
    const T *x = in[0].data<T>(), *y = out.data<T>(), *dy = d_out.data<T>();
    const int64_t n = in[0].num_elements();
    switch (this->node_.op()) {
      case v1::RELU:
        for (int64_t i = 0; i < n; ++i) gx[i] = x[i] > T(0) ? dy[i] : T(0);
        break;
      case v1::SIGMOID:
        for (int64_t i = 0; i < n; ++i) gx[i] = dy[i] * y[i] * (T(1) - y[i]);
        break;
      case v1::GELU: {  // d/dx x * Phi(x) = Phi(x) + x * phi(x)
        if constexpr (std::is_same_v<T, float>) {
          cpu::GeluBackward(x, dy, gx, n);
          break;
        }
        const T inv_sqrt_2pi = T(0.3989422804014327);
        for (int64_t i = 0; i < n; ++i) {
          gx[i] = dy[i] * (Phi(x[i]) + x[i] * inv_sqrt_2pi * std::exp(T(-0.5) * x[i] * x[i]));
        }
        break;
      }
      default:  // TANH
        for (int64_t i = 0; i < n; ++i) gx[i] = dy[i] * (T(1) - y[i] * y[i]);
        break;
    }
    (*d_in)[0] = g;
    return absl::OkStatus();
  }

 private:
  // f64, with the C library's erf; f32 is engine/kernels/cpu/vector_math's.
  static T Phi(T x) { return T(0.5) * (T(1) + std::erf(x * T(0.7071067811865476))); }
};

// RELU on a GPU: GpuKernels::Relu / ReluGrad (the gradient from the input, as on the CPU).
class ReluGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    return gpu.kernels->Relu(F32(in[0]), F32(*out), in[0].num_elements(), gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
    return gpu.kernels->ReluGrad(F32(in[0]), F32(d_out), F32((*d_in)[0]), in[0].num_elements(),
                                 gpu.stream());
  }
};

// SIGMOID, TANH, GELU on a GPU: GpuKernels::Activation / ActivationGrad (the gradient from the
// output for SIGMOID and TANH, from the input for GELU, as on the CPU).
class ActivationGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    return gpu.kernels->Activation(Op(), F32(in[0]), F32(*out), in[0].num_elements(), gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor& out, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
    return gpu.kernels->ActivationGrad(Op(), F32(in[0]), F32(out), F32(d_out), F32((*d_in)[0]),
                                       in[0].num_elements(), gpu.stream());
  }

 private:
  gpu::ActivationOp Op() const {
    switch (node_.op()) {
      case v1::SIGMOID:
        return gpu::ActivationOp::kSigmoid;
      case v1::TANH:
        return gpu::ActivationOp::kTanh;
      default:
        return gpu::ActivationOp::kGelu;
    }
  }
};

}  // namespace

void RegisterActivations(OpRegistry* r) {
  MustRegister(r, WithCuda<ReluGpuKernel>(CpuOp<ActivationKernel>(v1::RELU, 1, SameAsInput)));
  for (v1::OpType op : {v1::SIGMOID, v1::TANH, v1::GELU}) {
    MustRegister(r, WithCuda<ActivationGpuKernel>(CpuOp<ActivationKernel>(op, 1, SameAsInput)));
  }
}

}  // namespace lockstep::engine
