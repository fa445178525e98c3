// ADD, SUB, MUL: element-wise over two inputs of the same shape.
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> SameShapes(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatShapes(node, in));
  return in[0];
}

template <typename T>
class ElementwiseKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const T *x = in[0].data<T>(), *b = in[1].data<T>();
    T* y = out->data<T>();
    const int64_t n = in[0].num_elements();
    const v1::OpType op = this->node_.op();
    if (op == v1::ADD)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] + b[i];
    if (op == v1::SUB)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] - b[i];
    if (op == v1::MUL)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * b[i];
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    const v1::OpType op = this->node_.op();
    const T* dy = d_out.data<T>();
    const int64_t n = in[0].num_elements();
    for (int i = 0; i < 2; ++i) {
      if (!need[i]) continue;
      if (op == v1::ADD || (op == v1::SUB && i == 0)) {
        (*d_in)[i] = d_out;
        continue;
      }
      Tensor g = this->GradientLike(ctx, in, i);
      T* gi = g.data<T>();
      if (op == v1::SUB)
        for (int64_t j = 0; j < n; ++j) gi[j] = -dy[j];
      if (op == v1::MUL) {
        const T* other = in[1 - i].data<T>();
        for (int64_t j = 0; j < n; ++j) gi[j] = dy[j] * other[j];
      }
      (*d_in)[i] = g;
    }
    return absl::OkStatus();
  }
};

// ADD, SUB, MUL on a GPU: GpuKernels::Binary; the gradients pass d_out through (ADD, SUB's
// first input), negate it (SUB's second: times -1, exact) or multiply it by the other input.
class ElementwiseGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const v1::OpType op = node_.op();
    const gpu::BinaryOp b = op == v1::ADD   ? gpu::BinaryOp::kAdd
                            : op == v1::SUB ? gpu::BinaryOp::kSub
                                            : gpu::BinaryOp::kMul;
    return gpu.kernels->Binary(b, F32(in[0]), F32(in[1]), F32(*out), in[0].num_elements(),
                               gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    const v1::OpType op = node_.op();
    const int64_t n = in[0].num_elements();
    for (int i = 0; i < 2; ++i) {
      if (!need[i]) continue;
      if (op == v1::ADD || (op == v1::SUB && i == 0)) {
        (*d_in)[i] = d_out;
        continue;
      }
      LS_ASSIGN_OR_RETURN((*d_in)[i], GradientLike(ctx, in, i));
      if (op == v1::SUB) {
        LS_RETURN_IF_ERROR(gpu.kernels->Scale(F32(d_out), -1.f, F32((*d_in)[i]), n, gpu.stream()));
      } else {
        LS_RETURN_IF_ERROR(gpu.kernels->Binary(gpu::BinaryOp::kMul, F32(d_out), F32(in[1 - i]),
                                               F32((*d_in)[i]), n, gpu.stream()));
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterElementwise(OpRegistry* r) {
  for (v1::OpType op : {v1::ADD, v1::SUB, v1::MUL}) {
    MustRegister(r, WithCuda<ElementwiseGpuKernel>(CpuOp<ElementwiseKernel>(op, 2, SameShapes)));
  }
}

}  // namespace lockstep::engine
