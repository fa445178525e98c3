// SUM and MEAN over `axes` (all when empty), `keep_dims`.
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> ReduceShape(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  const Shape& x = in[0].shape;
  for (int64_t a : node.axes()) {
    if (a < -x.rank() || a >= x.rank()) {
      return ShapeError(node, absl::StrCat("axis ", a, " out of range for ", x.ToString()));
    }
  }
  std::vector<int> axes = NormalizedAxes(node, x.rank());
  std::vector<int64_t> dims;
  for (int i = 0; i < x.rank(); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced) {
      dims.push_back(x.dim(i));
    } else if (node.keep_dims()) {
      dims.push_back(1);
    }
  }
  return TypedShape{Shape(dims), in[0].dtype};
}

// The output index of every input element (reduced axes have stride 0).
template <typename Fn>
void ForEachReduced(const Shape& in, const std::vector<int>& axes, Fn fn) {
  int rank = in.rank();
  std::vector<int64_t> out_stride(rank, 0);
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; --i) {
    if (std::find(axes.begin(), axes.end(), i) != axes.end()) continue;
    out_stride[i] = s;
    s *= in.dim(i);
  }
  std::vector<int64_t> idx(rank, 0);
  int64_t n = in.num_elements(), o = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, o);
    for (int d = rank - 1; d >= 0; --d) {
      o += out_stride[d];
      if (++idx[d] < in.dim(d)) break;
      o -= out_stride[d] * idx[d];
      idx[d] = 0;
    }
  }
}

template <typename T>
class ReduceKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const T* x = in[0].data<T>();
    T* y = out->data<T>();
    const int64_t n = in[0].num_elements(), m = out->num_elements();
    std::fill(y, y + m, T(0));
    ForEachReduced(in[0].shape(), NormalizedAxes(this->node_, in[0].shape().rank()),
                   [&](int64_t i, int64_t o) { y[o] += x[i]; });
    if (this->node_.op() == v1::MEAN && m > 0) {
      T scale = T(m) / T(std::max<int64_t>(n, 1));
      for (int64_t i = 0; i < m; ++i) y[i] *= scale;
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor& out,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    Tensor g = this->GradientLike(ctx, in, 0);
    T* gx = g.data<T>();
    const T* dy = d_out.data<T>();
    T scale = T(1);
    if (this->node_.op() == v1::MEAN) {
      scale = T(out.num_elements()) / T(std::max<int64_t>(in[0].num_elements(), 1));
    }
    ForEachReduced(in[0].shape(), NormalizedAxes(this->node_, in[0].shape().rank()),
                   [&](int64_t i, int64_t o) { gx[i] = dy[o] * scale; });
    (*d_in)[0] = g;
    return absl::OkStatus();
  }
};

// SUM and MEAN on a GPU: GpuKernels::Reduce (one thread per output element, its inputs added
// in the CPU's order, then MEAN's scale) and ReduceGrad (dy broadcast times the scale).
class ReduceGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    LS_ASSIGN_OR_RETURN(gpu::ReducePlan plan, Plan(in[0], out->num_elements()));
    return gpu.kernels->Reduce(plan, node_.op() == v1::MEAN, F32(in[0]), F32(*out), gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor& out, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
    LS_ASSIGN_OR_RETURN(gpu::ReducePlan plan, Plan(in[0], out.num_elements()));
    if (node_.op() != v1::MEAN) plan.scale = 1.f;
    return gpu.kernels->ReduceGrad(plan, F32(d_out), F32((*d_in)[0]), gpu.stream());
  }

 private:
  // x's axes, the reduced ones marked; MEAN's scale as the CPU computes it.
  absl::StatusOr<gpu::ReducePlan> Plan(const Tensor& x, int64_t outputs) const {
    const Shape& s = x.shape();
    if (s.rank() > gpu::kMaxRank) {
      return absl::InvalidArgumentError(
          absl::StrCat(node_.name(), ": the CUDA kernel of ", v1::OpType_Name(node_.op()),
                       " takes rank <= ", gpu::kMaxRank, ", not ", s.ToString()));
    }
    gpu::ReducePlan plan;
    plan.rank = s.rank();
    for (int d = 0; d < s.rank(); ++d) plan.dims[d] = s.dim(d);
    for (int a : NormalizedAxes(node_, s.rank())) plan.reduced[a] = true;
    plan.scale = float(outputs) / float(std::max<int64_t>(x.num_elements(), 1));
    return plan;
  }
};

}  // namespace

void RegisterReductions(OpRegistry* r) {
  for (v1::OpType op : {v1::SUM, v1::MEAN}) {
    MustRegister(r, WithCuda<ReduceGpuKernel>(CpuOp<ReduceKernel>(op, 1, ReduceShape)));
  }
}

}  // namespace lockstep::engine
