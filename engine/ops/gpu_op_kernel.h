// GpuOpKernel: the base of the CUDA kernels defined beside each op's CPU kernel in engine/ops/
// (an op's kernels live with the op). f32 only. It keeps the node and the op's shape function,
// allocates outputs and input gradients in device memory through the KernelContext (the
// executor's pool on the device's allocator), and hands Compute/Backward the device they run
// on, KernelContext::gpu: its stream, kernels (GpuKernels) and products (BlasApi). Everything
// is enqueued on that stream; nothing waits for the device except what must read a value on
// the host (a loss kernel checking its labels), which says so.
//
// CudaKernelFactory<K>() makes the KernelFactory an op registers for Device::Type::kCuda: it
// refuses dtypes other than f32 (INVALID_ARGUMENT naming the node). A kernel run without a GPU
// device in its context answers FAILED_PRECONDITION naming the node.
// Thread model: as OpKernel.
#ifndef LOCKSTEP_ENGINE_OPS_GPU_OP_KERNEL_H_
#define LOCKSTEP_ENGINE_OPS_GPU_OP_KERNEL_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/gpu/gpu_device.h"
#include "engine/op_registry.h"

namespace lockstep::engine {

class GpuOpKernel : public OpKernel {
 public:
  GpuOpKernel(const v1::NodeDef& node, ShapeFn shape) : node_(node), shape_(std::move(shape)) {}

  absl::Status Forward(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    LS_ASSIGN_OR_RETURN(const gpu::GpuDevice* gpu, Gpu(ctx));
    LS_ASSIGN_OR_RETURN(TypedShape ts, OutputShape(in));
    LS_ASSIGN_OR_RETURN(*out, Allocate(ctx, ts.dtype, ts.shape));
    return Compute(ctx, *gpu, in, out);
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor& out,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    LS_ASSIGN_OR_RETURN(const gpu::GpuDevice* gpu, Gpu(ctx));
    return Gradient(ctx, *gpu, in, out, d_out, need, d_in);
  }

 protected:
  virtual absl::Status Compute(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                               absl::Span<const Tensor> in, Tensor* out) = 0;
  virtual absl::Status Gradient(const KernelContext&, const gpu::GpuDevice&,
                                absl::Span<const Tensor>, const Tensor&, const Tensor&,
                                const std::vector<bool>&, std::vector<Tensor>*) {
    return absl::InvalidArgumentError(
        absl::StrCat(v1::OpType_Name(node_.op()), " node ", node_.name(),
                     " has no gradient; it cannot lie between a trainable variable and the loss"));
  }

  absl::StatusOr<const gpu::GpuDevice*> Gpu(const KernelContext& ctx) const {
    if (ctx.gpu == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the CUDA kernel of ", v1::OpType_Name(node_.op()), " node ", node_.name(),
          " ran without a GPU device (KernelContext::gpu, from ExecutorOptions::gpu)"));
    }
    return ctx.gpu;
  }
  absl::StatusOr<TypedShape> OutputShape(absl::Span<const Tensor> in) const {
    std::vector<TypedShape> shapes;
    shapes.reserve(in.size());
    for (const Tensor& t : in) shapes.push_back(TypedShape{t.shape(), t.dtype()});
    return shape_(node_, shapes);
  }
  // Device memory from the context; an invalid tensor from it (the executor's allocation
  // failed and holds the reason) is RESOURCE_EXHAUSTED naming the node.
  absl::StatusOr<Tensor> Allocate(const KernelContext& ctx, DType dtype, const Shape& shape) const {
    return Checked(ctx.allocate(dtype, shape), dtype, shape);
  }
  absl::StatusOr<Tensor> GradientLike(const KernelContext& ctx, absl::Span<const Tensor> in,
                                      int i) const {
    return Checked(ctx.AllocateInputGradient(i, DType::kF32, in[i].shape()), DType::kF32,
                   in[i].shape());
  }

  const v1::NodeDef node_;

 private:
  absl::StatusOr<Tensor> Checked(Tensor t, DType dtype, const Shape& shape) const {
    if (!t.valid() || t.on_host()) {
      return absl::ResourceExhaustedError(
          absl::StrCat(node_.name(), ": no device memory for ", DTypeName(dtype), shape.ToString(),
                       t.valid() ? " (the allocator gave host memory)" : ""));
    }
    return t;
  }

  const ShapeFn shape_;
};

inline float* F32(Tensor& t) { return t.device_data<float>(); }
inline const float* F32(const Tensor& t) { return t.device_data<float>(); }

// The CUDA factory of kernel class K (constructed from the node and `shape`), f32 only.
template <class K>
KernelFactory CudaKernelFactory(ShapeFn shape) {
  return
      [shape](const v1::NodeDef& node, DType dtype) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
        if (dtype == DType::kF32) return std::make_unique<K>(node, shape);
        return absl::InvalidArgumentError(absl::StrCat(
            "node ", node.name(), ": CUDA kernels compute in f32, not ", DTypeName(dtype)));
      };
}

// `def` with K as its CUDA kernel.
template <class K>
OpDef WithCuda(OpDef def) {
  def.kernels[Device::Type::kCuda] = CudaKernelFactory<K>(def.shape);
  return def;
}

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_OPS_GPU_OP_KERNEL_H_
