// RELU, SIGMOID, TANH: element-wise activations, output shaped like the input.
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

  absl::Status Forward(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    LS_RETURN_IF_ERROR(this->AllocateOutput(ctx, in, out));
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
      default:  // TANH
        for (int64_t i = 0; i < n; ++i) gx[i] = dy[i] * (T(1) - y[i] * y[i]);
        break;
    }
    (*d_in)[0] = g;
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterActivations(OpRegistry* r) {
  for (v1::OpType op : {v1::RELU, v1::SIGMOID, v1::TANH}) {
    MustRegister(r, CpuOp<ActivationKernel>(op, 1, SameAsInput));
  }
}

}  // namespace lockstep::engine
