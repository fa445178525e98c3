// SOFTMAX over the last axis.
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> SoftmaxShape(const v1::NodeDef& node,
                                        const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  if (in[0].shape.rank() < 1) return ShapeError(node, "needs rank >= 1");
  return in[0];
}

template <typename T>
class SoftmaxKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const T* x = in[0].data<T>();
    T* y = out->data<T>();
    const int64_t n = in[0].num_elements(), c = in[0].shape()[-1];
    for (int64_t r = 0; c > 0 && r < n / c; ++r) cpu::SoftmaxRow(x + r * c, c, y + r * c);
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor& out,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    Tensor g = this->GradientLike(ctx, in, 0);
    T* gx = g.data<T>();
    const T *y = out.data<T>(), *dy = d_out.data<T>();
    const int64_t n = in[0].num_elements(), c = in[0].shape()[-1];
    for (int64_t r = 0; c > 0 && r < n / c; ++r) {
      T dot = 0;
      for (int64_t j = 0; j < c; ++j) dot += dy[r * c + j] * y[r * c + j];
      for (int64_t j = 0; j < c; ++j) gx[r * c + j] = y[r * c + j] * (dy[r * c + j] - dot);
    }
    (*d_in)[0] = g;
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterSoftmax(OpRegistry* r) {
  MustRegister(r, CpuOp<SoftmaxKernel>(v1::SOFTMAX, 1, SoftmaxShape));
}

}  // namespace lockstep::engine
