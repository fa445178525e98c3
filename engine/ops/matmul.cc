// MATMUL: [m, k] x [k, n] through cpu::Gemm (CPU) or BlasApi (CUDA), in the graph's
// precision (products.h).
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"
#include "engine/ops/products.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> MatMulShape(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  const Shape &a = in[0].shape, &b = in[1].shape;
  if (a.rank() != 2 || b.rank() != 2 || !DimsCompatible(a.dim(1), b.dim(0))) {
    return ShapeError(node, absl::StrCat("cannot multiply ", a.ToString(), " by ", b.ToString()));
  }
  return TypedShape{Shape{a.dim(0), b.dim(1)}, in[0].dtype};
}

template <typename T>
class MatMulKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const Shape &a = in[0].shape(), &b = in[1].shape();
    Product<T>(ctx, false, false, a.dim(0), b.dim(1), a.dim(1), T(1), in[0].data<T>(),
               in[1].data<T>(), T(0), out->data<T>());
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    const Shape &a = in[0].shape(), &b = in[1].shape();
    const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
    const T* dy = d_out.data<T>();
    // dB first: B is usually the weights, and their gradient can then be all-reduced
    // while dA is computed (KernelContext::InputGradientDone).
    if (need[1]) {  // dB = A^T * dC
      (*d_in)[1] = this->GradientLike(ctx, in, 1);
      Product<T>(ctx, true, false, k, n, m, T(1), in[0].data<T>(), dy, T(0), (*d_in)[1].data<T>());
      ctx.InputGradientDone(1);
    }
    if (need[0]) {  // dA = dC * B^T
      (*d_in)[0] = this->GradientLike(ctx, in, 0);
      Product<T>(ctx, false, true, m, k, n, T(1), dy, in[1].data<T>(), T(0), (*d_in)[0].data<T>());
    }
    return absl::OkStatus();
  }
};

// The same three products as the CPU kernel, row-major through the device's BlasApi.
class MatMulGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                       absl::Span<const Tensor> in, Tensor* out) override {
    gpu::GemmArgs g;
    g.m = in[0].shape().dim(0);
    g.k = in[0].shape().dim(1);
    g.n = in[1].shape().dim(1);
    g.a = F32(in[0]);
    g.b = F32(in[1]);
    g.c = F32(*out);
    return GpuProduct(ctx, gpu, g);
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    const int64_t m = in[0].shape().dim(0), k = in[0].shape().dim(1), n = in[1].shape().dim(1);
    if (need[1]) {  // dB [k, n] = A^T dC, first (see the CPU kernel)
      LS_ASSIGN_OR_RETURN((*d_in)[1], GradientLike(ctx, in, 1));
      gpu::GemmArgs g;
      g.trans_a = true;
      g.m = k;
      g.n = n;
      g.k = m;
      g.a = F32(in[0]);
      g.b = F32(d_out);
      g.c = F32((*d_in)[1]);
      LS_RETURN_IF_ERROR(GpuProduct(ctx, gpu, g));
      ctx.InputGradientDone(1);
    }
    if (need[0]) {  // dA [m, k] = dC B^T
      LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
      gpu::GemmArgs g;
      g.trans_b = true;
      g.m = m;
      g.n = k;
      g.k = n;
      g.a = F32(d_out);
      g.b = F32(in[1]);
      g.c = F32((*d_in)[0]);
      LS_RETURN_IF_ERROR(GpuProduct(ctx, gpu, g));
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterMatMul(OpRegistry* r) {
  MustRegister(r, WithCuda<MatMulGpuKernel>(CpuOp<MatMulKernel>(v1::MATMUL, 2, MatMulShape)));
}

}  // namespace lockstep::engine
