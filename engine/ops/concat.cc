// CONCAT: one or more inputs of one rank and dtype joined along `axis` (negative counts
// from the end); every other dimension must agree.
#include <cstring>

#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> ConcatShape(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  const int rank = in[0].shape.rank();
  const int64_t axis = node.axis() < 0 ? node.axis() + rank : node.axis();
  if (axis < 0 || axis >= rank) {
    return ShapeError(
        node, absl::StrCat("axis ", node.axis(), " is out of range for ", in[0].shape.ToString()));
  }
  std::vector<int64_t> dims = in[0].shape.dims();
  for (size_t k = 1; k < in.size(); ++k) {
    const Shape& s = in[k].shape;
    bool fits = s.rank() == rank;
    for (int d = 0; fits && d < rank; ++d) {
      if (d == axis) continue;
      fits = DimsCompatible(s.dim(d), dims[d]);
      if (dims[d] < 0) dims[d] = s.dim(d);
    }
    if (!fits) {
      return ShapeError(node, absl::StrCat("cannot join ", in[0].shape.ToString(), " and ",
                                           s.ToString(), " along axis ", axis));
    }
    dims[axis] = dims[axis] < 0 || s.dim(axis) < 0 ? -1 : dims[axis] + s.dim(axis);
  }
  return TypedShape{Shape(dims), in[0].dtype};
}

template <typename T>
class ConcatKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    ForEachBlock(in, [&](int k, int64_t src, int64_t dst, int64_t len) {
      std::memcpy(out->data<T>() + dst, in[k].data<T>() + src, len * sizeof(T));
    });
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    for (size_t k = 0; k < in.size(); ++k) {
      if (need[k]) (*d_in)[k] = this->GradientLike(ctx, in, k);
    }
    ForEachBlock(in, [&](int k, int64_t src, int64_t dst, int64_t len) {
      if (need[k]) std::memcpy((*d_in)[k].data<T>() + src, d_out.data<T>() + dst, len * sizeof(T));
    });
    return absl::OkStatus();
  }

 private:
  // fn(input k, offset in input k, offset in the output, elements) for every contiguous
  // block an input contributes.
  template <typename Fn>
  void ForEachBlock(absl::Span<const Tensor> in, Fn fn) const {
    const Shape& s0 = in[0].shape();
    const int64_t axis =
        this->node_.axis() < 0 ? this->node_.axis() + s0.rank() : this->node_.axis();
    int64_t outer = 1;
    for (int d = 0; d < axis; ++d) outer *= s0.dim(d);
    std::vector<int64_t> block(in.size());
    int64_t row = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      block[k] = outer == 0 ? 0 : in[k].num_elements() / outer;
      row += block[k];
    }
    for (int64_t o = 0; o < outer; ++o) {
      int64_t dst = o * row;
      for (size_t k = 0; k < in.size(); ++k) {
        fn(static_cast<int>(k), o * block[k], dst, block[k]);
        dst += block[k];
      }
    }
  }
};

// The inputs of CONCAT as [outer, width_k] blocks (ConcatKernel::ForEachBlock's view).
struct ConcatLayout {
  int64_t outer = 1;
  std::vector<int64_t> width;
  int64_t row = 0;
};

ConcatLayout LayoutOf(const v1::NodeDef& node, absl::Span<const Tensor> in) {
  const Shape& s0 = in[0].shape();
  const int64_t axis = node.axis() < 0 ? node.axis() + s0.rank() : node.axis();
  ConcatLayout l;
  for (int d = 0; d < axis; ++d) l.outer *= s0.dim(d);
  for (const Tensor& t : in) {
    l.width.push_back(l.outer == 0 ? 0 : t.num_elements() / l.outer);
    l.row += l.width.back();
  }
  return l;
}

// CONCAT on a GPU: GpuKernels::Concat (one gather over up to gpu::kMaxConcatInputs inputs) and
// SliceColumns for each input's gradient.
class ConcatGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    if (in.size() > static_cast<size_t>(gpu::kMaxConcatInputs)) {
      return absl::InvalidArgumentError(absl::StrCat(
          node_.name(), ": the CUDA kernel of CONCAT joins at most ", gpu::kMaxConcatInputs,
          " inputs, not ", in.size(), "; join them in groups (nested concatenations)"));
    }
    const ConcatLayout l = LayoutOf(node_, in);
    gpu::ConcatPlan plan;
    plan.inputs = static_cast<int>(in.size());
    plan.outer = l.outer;
    for (size_t k = 0; k < in.size(); ++k) {
      plan.data[k] = F32(in[k]);
      plan.width[k] = l.width[k];
    }
    return gpu.kernels->Concat(plan, F32(*out), gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    const ConcatLayout l = LayoutOf(node_, in);
    int64_t offset = 0;
    for (size_t k = 0; k < in.size(); ++k) {
      if (need[k]) {
        LS_ASSIGN_OR_RETURN((*d_in)[k], GradientLike(ctx, in, k));
        LS_RETURN_IF_ERROR(gpu.kernels->SliceColumns(F32(d_out), l.row, offset, F32((*d_in)[k]),
                                                     l.outer, l.width[k], gpu.stream()));
      }
      offset += l.width[k];
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterConcat(OpRegistry* r) {
  MustRegister(
      r, WithCuda<ConcatGpuKernel>(CpuOp<ConcatKernel>(v1::CONCAT, OpDef::kVariadic, ConcatShape)));
}

}  // namespace lockstep::engine
