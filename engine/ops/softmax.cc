// SOFTMAX over the last axis.
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

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

// SOFTMAX on a GPU: GpuKernels::SoftmaxRows (a block per row; within kSoftmaxRelTolerance of
// the CPU: the block's order of the row sum) and SoftmaxGrad (one thread per row, the CPU's
// arithmetic on the output).
class SoftmaxGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const int64_t c = in[0].shape()[-1];
    if (c == 0) return absl::OkStatus();
    return gpu.kernels->SoftmaxRows(F32(in[0]), F32(*out), in[0].num_elements() / c, c,
                                    gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor& out, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
    const int64_t c = in[0].shape()[-1];
    if (c == 0) return absl::OkStatus();
    return gpu.kernels->SoftmaxGrad(F32(out), F32(d_out), F32((*d_in)[0]), in[0].num_elements() / c,
                                    c, gpu.stream());
  }
};

}  // namespace

void RegisterSoftmax(OpRegistry* r) {
  MustRegister(r, WithCuda<SoftmaxGpuKernel>(CpuOp<SoftmaxKernel>(v1::SOFTMAX, 1, SoftmaxShape)));
}

}  // namespace lockstep::engine
