// BIAS_ADD: x[..., n] + b[n], or more generally x + b broadcast over x's leading axes
// (b's shape is x's last axes, e.g. a position embedding [t, d] on [batch, t, d]).
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> BiasAddShape(const v1::NodeDef& node,
                                        const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  const Shape &x = in[0].shape, &b = in[1].shape;
  bool ok = b.rank() >= 1 && b.rank() <= x.rank();
  for (int i = 1; ok && i <= b.rank(); ++i) ok = DimsCompatible(x[-i], b[-i]);
  if (!ok) {
    return ShapeError(node, absl::StrCat("bias ", b.ToString(), " does not match the last axes of ",
                                         x.ToString()));
  }
  return in[0];
}

template <typename T>
class BiasAddKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const T *x = in[0].data<T>(), *b = in[1].data<T>();
    T* y = out->data<T>();
    const int64_t n = in[0].num_elements(), c = in[1].num_elements();
    for (int64_t r = 0; r < n / std::max<int64_t>(c, 1); ++r) {
      for (int64_t j = 0; j < c; ++j) y[r * c + j] = x[r * c + j] + b[j];
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    if (need[0]) (*d_in)[0] = d_out;
    if (need[1]) {
      Tensor g = this->GradientLike(ctx, in, 1);
      T* gb = g.data<T>();
      const T* dy = d_out.data<T>();
      const int64_t n = in[0].num_elements(), c = in[1].num_elements();
      std::fill(gb, gb + c, T(0));
      for (int64_t r = 0; r < n / std::max<int64_t>(c, 1); ++r) {
        for (int64_t j = 0; j < c; ++j) gb[j] += dy[r * c + j];
      }
      (*d_in)[1] = g;
    }
    return absl::OkStatus();
  }
};

// GpuKernels::BiasAdd forward; the bias gradient is GpuKernels::ColumnSum.
class BiasAddGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const int64_t c = in[1].num_elements();
    if (c == 0) return absl::OkStatus();
    return gpu.kernels->BiasAdd(F32(in[0]), F32(in[1]), F32(*out), in[0].num_elements() / c, c,
                                gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (need[0]) (*d_in)[0] = d_out;
    if (need[1]) {
      LS_ASSIGN_OR_RETURN((*d_in)[1], GradientLike(ctx, in, 1));
      const int64_t c = in[1].num_elements();
      if (c == 0) return absl::OkStatus();
      LS_RETURN_IF_ERROR(gpu.kernels->ColumnSum(F32(d_out), F32((*d_in)[1]),
                                                in[0].num_elements() / c, c, gpu.stream()));
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterBiasAdd(OpRegistry* r) {
  MustRegister(r, WithCuda<BiasAddGpuKernel>(CpuOp<BiasAddKernel>(v1::BIAS_ADD, 2, BiasAddShape)));
}

}  // namespace lockstep::engine
