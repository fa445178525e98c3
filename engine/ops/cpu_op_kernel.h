// CpuOpKernel<T>: the base of the CPU kernels defined beside each op in engine/ops/, in
// f32 or f64 (T). It keeps the node and the op's shape function, allocates outputs (then
// calls Compute) and input gradients, and answers "no gradient" for ops that have none.
// CpuKernels<K>() makes the KernelFactory an op registers for Device::Type::kCpu. Element loops are
// sequential; products go through cpu::Gemm (CBLAS). Thread model: as OpKernel.
#ifndef LOCKSTEP_ENGINE_OPS_CPU_OP_KERNEL_H_
#define LOCKSTEP_ENGINE_OPS_CPU_OP_KERNEL_H_

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/op_registry.h"

namespace lockstep::engine {

template <typename T>
class CpuOpKernel : public OpKernel {
 public:
  CpuOpKernel(const v1::NodeDef& node, ShapeFn shape) : node_(node), shape_(std::move(shape)) {}

  // Allocates the output (AllocateOutput) and computes it (Compute). Kernels whose output
  // is a view of an input (reshape, dropout when not training) override Forward instead.
  absl::Status Forward(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    LS_RETURN_IF_ERROR(AllocateOutput(ctx, in, out));
    return Compute(ctx, in, out);
  }

  absl::Status Backward(const KernelContext&, absl::Span<const Tensor>, const Tensor&,
                        const Tensor&, const std::vector<bool>&, std::vector<Tensor>*) override {
    return absl::InvalidArgumentError(
        absl::StrCat(v1::OpType_Name(node_.op()), " node ", node_.name(),
                     " has no gradient; it cannot lie between a trainable variable and the loss"));
  }

 protected:
  absl::StatusOr<TypedShape> OutputShape(absl::Span<const Tensor> in) const {
    std::vector<TypedShape> shapes;
    shapes.reserve(in.size());
    for (const Tensor& t : in) shapes.push_back(TypedShape{t.shape(), t.dtype()});
    return shape_(node_, shapes);
  }
  // The output, allocated with the shape the shape function gives for `in`.
  absl::Status AllocateOutput(const KernelContext& ctx, absl::Span<const Tensor> in,
                              Tensor* out) const {
    LS_ASSIGN_OR_RETURN(TypedShape ts, OutputShape(in));
    *out = ctx.allocate(ts.dtype, ts.shape);
    return absl::OkStatus();
  }
  // The gradient of input `i`, shaped like it.
  static Tensor GradientLike(const KernelContext& ctx, absl::Span<const Tensor> in, int i) {
    return ctx.AllocateInputGradient(i, DTypeOf<T>(), in[i].shape());
  }

  // Fills *out, allocated with the shape function's shape (every element).
  virtual absl::Status Compute(const KernelContext&, absl::Span<const Tensor>, Tensor*) {
    return absl::InternalError(absl::StrCat(node_.name(), ": kernel computes nothing"));
  }

  const v1::NodeDef node_;

 private:
  const ShapeFn shape_;
};

// The CPU factory of kernel template K (K<float>, K<double> constructed from the node and
// `shape`).
template <template <typename> class K>
KernelFactory CpuKernels(ShapeFn shape) {
  return
      [shape](const v1::NodeDef& node, DType dtype) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
        if (dtype == DType::kF32) return std::make_unique<K<float>>(node, shape);
        if (dtype == DType::kF64) return std::make_unique<K<double>>(node, shape);
        return absl::InvalidArgumentError(absl::StrCat(
            "node ", node.name(), ": CPU kernels compute in f32 or f64, not ", DTypeName(dtype)));
      };
}

// An op with one CPU kernel template: its definition for OpRegistry::Register.
template <template <typename> class K>
OpDef CpuOp(v1::OpType op, int num_inputs, ShapeFn shape) {
  OpDef def;
  def.op = op;
  def.num_inputs = num_inputs;
  def.kernels[Device::Type::kCpu] = CpuKernels<K>(shape);
  def.shape = std::move(shape);
  return def;
}

namespace cpu {

// y = softmax(x) over c elements (max-shifted).
template <typename T>
void SoftmaxRow(const T* x, int64_t c, T* y) {
  T m = *std::max_element(x, x + c);
  T s = 0;
  for (int64_t j = 0; j < c; ++j) s += (y[j] = std::exp(x[j] - m));
  for (int64_t j = 0; j < c; ++j) y[j] /= s;
}

inline int64_t LabelAt(const Tensor& labels, int64_t i) {
  return labels.dtype() == DType::kI32 ? labels.data<int32_t>()[i] : labels.data<int64_t>()[i];
}

}  // namespace cpu
}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_OPS_CPU_OP_KERNEL_H_
