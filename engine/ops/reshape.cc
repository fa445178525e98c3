// RESHAPE (to `target_shape`, one -1 allowed) and FLATTEN ([b, ...] -> [b, prod(...)]):
// views of the input's buffer, no copy, on any device (the CUDA factory makes the same kernel).
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> ReshapeShape(const v1::NodeDef& node,
                                        const std::vector<TypedShape>& in) {
  const Shape& x = in[0].shape;
  std::vector<int64_t> dims(node.target_shape().begin(), node.target_shape().end());
  int unknown = -1;
  int64_t known = 1;
  for (int i = 0; i < static_cast<int>(dims.size()); ++i) {
    if (dims[i] == -1) {
      if (unknown >= 0) return ShapeError(node, "target_shape has more than one -1");
      unknown = i;
    } else if (dims[i] <= 0) {
      return ShapeError(node, absl::StrCat("target_shape dimension ", dims[i], " is not positive"));
    } else {
      known *= dims[i];
    }
  }
  const std::string cannot =
      absl::StrCat("cannot reshape ", x.ToString(), " to ", Shape(dims).ToString());
  if (x.fully_known()) {
    int64_t n = x.num_elements();
    if (unknown >= 0) {
      if (n % known != 0) return ShapeError(node, cannot);
      dims[unknown] = n / known;
    } else if (n != known) {
      return ShapeError(node, cannot);
    }
  } else if (unknown < 0) {
    return ShapeError(node, "reshaping an input of unknown size needs a -1 in target_shape");
  } else {
    int64_t per = 1;
    for (int i = 1; i < x.rank(); ++i) per *= x.dim(i);
    // Unknown batch: the per-example part must divide what is known.
    if (x.dim(0) < 0 && x.rank() > 0 && known % per != 0 && per % known != 0) {
      return ShapeError(node, cannot);
    }
  }
  return TypedShape{Shape(dims), in[0].dtype};
}

absl::StatusOr<TypedShape> FlattenShape(const v1::NodeDef& node,
                                        const std::vector<TypedShape>& in) {
  const Shape& x = in[0].shape;
  if (x.rank() < 1) return ShapeError(node, "needs rank >= 1");
  int64_t per = 1;
  for (int i = 1; i < x.rank(); ++i) per *= x.dim(i);
  return TypedShape{Shape{x.dim(0), per}, in[0].dtype};
}

template <typename T>
class ReshapeKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Forward(const KernelContext&, absl::Span<const Tensor> in, Tensor* out) override {
    LS_ASSIGN_OR_RETURN(TypedShape ts, this->OutputShape(in));
    LS_ASSIGN_OR_RETURN(*out, in[0].Reshaped(ts.shape));
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext&, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN((*d_in)[0], d_out.Reshaped(in[0].shape()));
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterReshapes(OpRegistry* r) {
  MustRegister(r,
               WithCuda<ReshapeKernel<float>>(CpuOp<ReshapeKernel>(v1::RESHAPE, 1, ReshapeShape)));
  MustRegister(r,
               WithCuda<ReshapeKernel<float>>(CpuOp<ReshapeKernel>(v1::FLATTEN, 1, FlattenShape)));
}

}  // namespace lockstep::engine
