// EMBEDDING: (ids [...], table [vocab, dim]) -> [..., dim], row ids[i] of the table for
// each id. Ids are integers, or floats holding integral values (a model's features); the
// table's gradient is dense: zero but for the rows looked up, where dy is summed.
#include "engine/gpu/device_tensor.h"
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

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

// Id i of `ids` (host memory), checked to be an integer row of a table of `vocab` rows.
absl::StatusOr<int64_t> CheckedId(const v1::NodeDef& node, const Tensor& ids, int64_t vocab,
                                  int64_t i) {
  double v;
  if (ids.dtype() == DType::kI32 || ids.dtype() == DType::kI64) {
    v = double(cpu::LabelAt(ids, i));
  } else {
    v = ids.AsDouble(i);
  }
  if (!(v >= 0 && v < double(vocab)) || v != std::floor(v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(node.name(), ": id ", v, " at position ", i, " is not an integer in [0, ",
                     vocab, "); check the data's token ids and the layer's input_dim"));
  }
  return static_cast<int64_t>(v);
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
    return CheckedId(this->node_, in[0], in[1].shape().dim(0), i);
  }
};

// EMBEDDING on a GPU: GpuKernels::Gather and EmbeddingGrad (deterministic: the thread owning a
// table element adds its ids' rows of dy in order; no atomics). The forward pass checks the
// ids on the host first, as the CPU kernel does (an id out of range would read outside the
// table on the device): it copies them back and waits for the stream, one small
// synchronisation per step. Float ids are f32, as the table.
class EmbeddingGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const int64_t vocab = in[1].shape().dim(0), dim = in[1].shape().dim(1);
    LS_ASSIGN_OR_RETURN(const gpu::IndexType type, Type(in[0]));
    LS_ASSIGN_OR_RETURN(Tensor host, gpu::CopyToHost(*gpu.context, in[0]));
    for (int64_t i = 0; i < host.num_elements(); ++i) {
      LS_RETURN_IF_ERROR(CheckedId(node_, host, vocab, i).status());
    }
    return gpu.kernels->Gather(in[0].raw_device_data(), type, F32(in[1]), F32(*out),
                               in[0].num_elements(), vocab, dim, gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (need[0]) {  // ids are indices: a step function, zero gradient
      LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
      LS_RETURN_IF_ERROR(gpu.context->Zero(F32((*d_in)[0]), in[0].num_elements() * sizeof(float)));
    }
    if (!need[1]) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN((*d_in)[1], GradientLike(ctx, in, 1));
    LS_ASSIGN_OR_RETURN(const gpu::IndexType type, Type(in[0]));
    return gpu.kernels->EmbeddingGrad(in[0].raw_device_data(), type, F32(d_out), F32((*d_in)[1]),
                                      in[0].num_elements(), in[1].shape().dim(0),
                                      in[1].shape().dim(1), gpu.stream());
  }

 private:
  absl::StatusOr<gpu::IndexType> Type(const Tensor& ids) const {
    switch (ids.dtype()) {
      case DType::kI32:
        return gpu::IndexType::kI32;
      case DType::kI64:
        return gpu::IndexType::kI64;
      case DType::kF32:
        return gpu::IndexType::kF32;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            node_.name(), ": the CUDA kernel of EMBEDDING takes i32, i64 or f32 ids, not ",
            DTypeName(ids.dtype())));
    }
  }
};

}  // namespace

void RegisterEmbedding(OpRegistry* r) {
  MustRegister(
      r, WithCuda<EmbeddingGpuKernel>(CpuOp<EmbeddingKernel>(v1::EMBEDDING, 2, EmbeddingShape)));
}

}  // namespace lockstep::engine
