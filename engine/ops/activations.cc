// RELU, SIGMOID, TANH, GELU (exact: x * Phi(x), Phi the standard normal CDF): element-wise
// activations, output shaped like the input.
#include <type_traits>

#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"

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
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * Phi(x[i]);
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
  static T Phi(T x) { return T(0.5) * (T(1) + Erf(x * T(0.7071067811865476))); }
  // f64: the C library's erf. f32: a rational approximation (max absolute error 5e-7, as
  // Eigen's), with no call, so that GELU's loops vectorise.
  static T Erf(T v) {
    if constexpr (!std::is_same_v<T, float>) {
      return std::erf(v);
    } else {
      const float x = std::max(-4.f, std::min(4.f, v)), x2 = x * x;
      float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
      p = x2 * p + -2.10102402082508e-06f;
      p = x2 * p + -5.69250639462346e-05f;
      p = x2 * p + -7.34990630326855e-04f;
      p = x2 * p + -2.95459980854025e-03f;
      p = x2 * p + -1.60960333262415e-02f;
      float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
      q = x2 * q + -1.68282697438203e-03f;
      q = x2 * q + -7.37332916720468e-03f;
      q = x2 * q + -1.42647390514189e-02f;
      return x * p / q;
    }
  }
};

}  // namespace

void RegisterActivations(OpRegistry* r) {
  for (v1::OpType op : {v1::RELU, v1::SIGMOID, v1::TANH, v1::GELU}) {
    MustRegister(r, CpuOp<ActivationKernel>(op, 1, SameAsInput));
  }
}

}  // namespace lockstep::engine
