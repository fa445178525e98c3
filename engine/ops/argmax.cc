// ARGMAX over the last axis, int64 output; no gradient.
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> ArgMaxShape(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  const Shape& x = in[0].shape;
  if (x.rank() < 1) return ShapeError(node, "needs rank >= 1");
  std::vector<int64_t> dims(x.dims().begin(), x.dims().end() - 1);
  return TypedShape{Shape(dims), DType::kI64};
}

template <typename T>
class ArgMaxKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const T* x = in[0].data<T>();
    const int64_t n = in[0].num_elements(), c = in[0].shape()[-1];
    int64_t* idx = out->data<int64_t>();
    for (int64_t r = 0; c > 0 && r < n / c; ++r) {
      idx[r] = std::max_element(x + r * c, x + (r + 1) * c) - (x + r * c);
    }
    return absl::OkStatus();
  }
};

// ARGMAX on a GPU: GpuKernels::ArgmaxRows (one thread per row, the first largest).
class ArgMaxGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const int64_t c = in[0].shape()[-1];
    if (c == 0) return absl::OkStatus();
    return gpu.kernels->ArgmaxRows(F32(in[0]), out->device_data<int64_t>(),
                                   in[0].num_elements() / c, c, gpu.stream());
  }
};

}  // namespace

void RegisterArgMax(OpRegistry* r) {
  MustRegister(r, WithCuda<ArgMaxGpuKernel>(CpuOp<ArgMaxKernel>(v1::ARGMAX, 1, ArgMaxShape)));
}

}  // namespace lockstep::engine
