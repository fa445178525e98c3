// EMBEDDING: (ids [...], table [vocab, dim]) -> [..., dim], row ids[i] of the table for
// each id. Ids are integers, or floats holding integral values (a model's features); the
// table's gradient is dense: zero but for the rows looked up, where dy is summed.
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> EmbeddingShape(const v1::NodeDef& node,
                                          const std::vector<TypedShape>& in) {
  const Shape &ids = in[0].shape, &table = in[1].shape;
  if (!IsFloat(in[1].dtype)) return ShapeError(node, "the table must be f32 or f64");
  if (!IsInt(in[0].dtype) && in[0].dtype != in[1].dtype) {
    return ShapeError(node, absl::StrCat("ids must be integers or ", DTypeName(in[1].dtype),
                                         ", got ", DTypeName(in[0].dtype)));
  }
  if (table.rank() != 2) {
    return ShapeError(node, absl::StrCat("table ", table.ToString(), " is not [vocab, dim]"));
  }
  std::vector<int64_t> dims = ids.dims();
  dims.push_back(table.dim(1));
  return TypedShape{Shape(dims), in[1].dtype};
}

template <typename T>
class EmbeddingKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const int64_t dim = in[1].shape().dim(1);
    const T* table = in[1].data<T>();
    T* y = out->data<T>();
    for (int64_t i = 0; i < in[0].num_elements(); ++i) {
      LS_ASSIGN_OR_RETURN(int64_t id, Id(in, i));
      std::copy(table + id * dim, table + (id + 1) * dim, y + i * dim);
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    if (need[0]) {  // ids are indices: a step function, zero gradient
      (*d_in)[0] = this->GradientLike(ctx, in, 0);
      std::fill((*d_in)[0].data<T>(), (*d_in)[0].data<T>() + in[0].num_elements(), T(0));
    }
    if (!need[1]) return absl::OkStatus();
    const int64_t dim = in[1].shape().dim(1);
    Tensor g = this->GradientLike(ctx, in, 1);
    T* gt = g.data<T>();
    const T* dy = d_out.data<T>();
    std::fill(gt, gt + g.num_elements(), T(0));
    for (int64_t i = 0; i < in[0].num_elements(); ++i) {
      LS_ASSIGN_OR_RETURN(int64_t id, Id(in, i));
      for (int64_t j = 0; j < dim; ++j) gt[id * dim + j] += dy[i * dim + j];
    }
    (*d_in)[1] = g;
    return absl::OkStatus();
  }

 private:
  // Id i, checked to be an integer row of the table.
  absl::StatusOr<int64_t> Id(absl::Span<const Tensor> in, int64_t i) const {
    const Tensor& ids = in[0];
    const int64_t vocab = in[1].shape().dim(0);
    double v;
    if (ids.dtype() == DType::kI32 || ids.dtype() == DType::kI64) {
      v = double(cpu::LabelAt(ids, i));
    } else {
      v = double(ids.data<T>()[i]);
    }
    if (!(v >= 0 && v < double(vocab)) || v != std::floor(v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          this->node_.name(), ": id ", v, " at position ", i, " is not an integer in [0, ", vocab,
          "); check the data's token ids and the layer's input_dim"));
    }
    return static_cast<int64_t>(v);
  }
};

}  // namespace

void RegisterEmbedding(OpRegistry* r) {
  MustRegister(r, CpuOp<EmbeddingKernel>(v1::EMBEDDING, 2, EmbeddingShape));
}

}  // namespace lockstep::engine
