// DROPOUT: in training, zeroes each element with probability `rate` and scales the rest by
// 1 / (1 - rate); the identity otherwise. The mask is Philox keyed by
// MixKey(KernelContext::dropout_key, node index), counter = element.
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"
#include "engine/philox.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> DropoutShape(const v1::NodeDef& node,
                                        const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  if (!(node.rate() >= 0 && node.rate() < 1)) {
    return ShapeError(node, absl::StrCat("rate ", node.rate(), " is not in [0, 1)"));
  }
  return in[0];
}

template <typename T>
class DropoutKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Forward(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    if (!ctx.training || this->node_.rate() == 0) {
      *out = in[0];
      return absl::OkStatus();
    }
    LS_RETURN_IF_ERROR(this->AllocateOutput(ctx, in, out));
    const T* x = in[0].data<T>();
    T* y = out->data<T>();
    const T scale = T(1) / (T(1) - T(this->node_.rate()));
    ForEachKept(ctx, in[0].num_elements(),
                [&](int64_t i, bool keep) { y[i] = keep ? x[i] * scale : T(0); });
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    if (!ctx.training || this->node_.rate() == 0) {
      (*d_in)[0] = d_out;
      return absl::OkStatus();
    }
    Tensor g = this->GradientLike(ctx, in, 0);
    T* gx = g.data<T>();
    const T* dy = d_out.data<T>();
    const T scale = T(1) / (T(1) - T(this->node_.rate()));
    ForEachKept(ctx, in[0].num_elements(),
                [&](int64_t i, bool keep) { gx[i] = keep ? dy[i] * scale : T(0); });
    (*d_in)[0] = g;
    return absl::OkStatus();
  }

 private:
  // Element i is kept when its Philox uniform >= rate.
  template <typename Fn>
  void ForEachKept(const KernelContext& ctx, int64_t n, Fn fn) const {
    Philox rng(MixKey(ctx.dropout_key, static_cast<uint64_t>(ctx.node_index)));
    const double rate = this->node_.rate();
    for (int64_t base = 0; base < n; base += 4) {
      Philox::Block block = rng.Generate(static_cast<uint64_t>(base / 4));
      for (int64_t j = 0; j < 4 && base + j < n; ++j) {
        fn(base + j, block[j] * (1.0 / 4294967296.0) >= rate);
      }
    }
  }
};

// DROPOUT on a GPU: GpuKernels::Dropout draws the CPU kernel's Philox mask (same key, same
// counters: bit for bit the same elements kept) for the forward pass and again for the gradient.
class DropoutGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

  absl::Status Forward(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    if (!ctx.training || node_.rate() == 0) {
      *out = in[0];
      return absl::OkStatus();
    }
    return GpuOpKernel::Forward(ctx, in, out);
  }

 protected:
  absl::Status Compute(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                       absl::Span<const Tensor> in, Tensor* out) override {
    return gpu.kernels->Dropout(Key(ctx), node_.rate(), Scale(), F32(in[0]), F32(*out),
                                in[0].num_elements(), gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    if (!ctx.training || node_.rate() == 0) {
      (*d_in)[0] = d_out;
      return absl::OkStatus();
    }
    LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
    return gpu.kernels->Dropout(Key(ctx), node_.rate(), Scale(), F32(d_out), F32((*d_in)[0]),
                                in[0].num_elements(), gpu.stream());
  }

 private:
  static uint64_t Key(const KernelContext& ctx) {
    return MixKey(ctx.dropout_key, static_cast<uint64_t>(ctx.node_index));
  }
  float Scale() const { return 1.f / (1.f - static_cast<float>(node_.rate())); }
};

}  // namespace

void RegisterDropout(OpRegistry* r) {
  MustRegister(r, WithCuda<DropoutGpuKernel>(CpuOp<DropoutKernel>(v1::DROPOUT, 1, DropoutShape)));
}

}  // namespace lockstep::engine
