// CONV2D (NHWC input, HWIO filter, `strides`, `padding`; im2col then one GEMM) and
// MAX_POOL2D (NHWC, `window`, `strides` defaulting to the window, `padding`): the
// sliding-window ops, one shape function. Their CUDA kernels make the same computation on the
// device: GpuKernels' Im2Col/Col2Im around BlasApi products, MaxPool/MaxPoolGrad. The products
// compute in the graph's precision (products.h).
#include "engine/kernels/cpu/window_ops.h"
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"
#include "engine/ops/products.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> WindowShape(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  const Shape& x = in[0].shape;
  if (x.rank() != 4) return ShapeError(node, absl::StrCat("input ", x.ToString(), " is not NHWC"));
  if (node.padding() != v1::VALID && node.padding() != v1::SAME) {
    return ShapeError(node, "padding must be VALID or SAME");
  }
  int64_t kh, kw, channels;
  std::pair<int, int> strides;
  if (node.op() == v1::CONV2D) {
    const Shape& f = in[1].shape;
    if (f.rank() != 4 || !DimsCompatible(f.dim(2), x.dim(3))) {
      return ShapeError(
          node, absl::StrCat("filter ", f.ToString(),
                             " is not [h, w, in_channels, out_channels] for input ", x.ToString()));
    }
    kh = f.dim(0), kw = f.dim(1), channels = f.dim(3);
    LS_ASSIGN_OR_RETURN(strides, WindowPair(node, node.strides(), "strides", 1));
  } else {
    LS_ASSIGN_OR_RETURN(auto window, WindowPair(node, node.window(), "window", 2));
    kh = window.first, kw = window.second, channels = x.dim(3);
    LS_ASSIGN_OR_RETURN(strides, WindowPair(node, node.strides(), "strides", 0));
    if (node.strides().empty()) strides = window;  // pooling strides default to the window
  }
  int64_t oh = WindowOutputSize(x.dim(1), kh, strides.first, node.padding());
  int64_t ow = WindowOutputSize(x.dim(2), kw, strides.second, node.padding());
  if (oh == 0 || ow == 0) {
    return ShapeError(node, absl::StrCat("window ", kh, "x", kw, " does not fit input ",
                                         x.ToString(), " with VALID padding"));
  }
  return TypedShape{Shape{x.dim(0), oh, ow, channels}, in[0].dtype};
}

// The pooling window of a MAX_POOL2D node over input x (strides default to the window).
cpu::Window PoolWindow(const v1::NodeDef& node, const Shape& x) {
  int kh = node.window().empty() ? 2 : node.window(0);
  int kw = node.window().empty() ? 2 : node.window(node.window_size() - 1);
  v1::NodeDef geometry = node;
  if (geometry.strides().empty()) {  // pooling strides default to the window
    geometry.add_strides(kh);
    geometry.add_strides(kw);
  }
  return cpu::MakeWindow(x, kh, kw, geometry);
}

template <typename T>
class Conv2DKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const Shape& f = in[1].shape();
    cpu::Window w = cpu::MakeWindow(in[0].shape(), f.dim(0), f.dim(1), this->node_);
    Tensor cols = ctx.allocate(DTypeOf<T>(), Shape{w.rows(), w.cols()});
    cpu::Im2Col(in[0].data<T>(), w, cols.data<T>());
    Product<T>(ctx, false, false, w.rows(), f.dim(3), w.cols(), T(1), cols.data<T>(),
               in[1].data<T>(), T(0), out->data<T>());
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    const Shape& f = in[1].shape();
    cpu::Window w = cpu::MakeWindow(in[0].shape(), f.dim(0), f.dim(1), this->node_);
    const int64_t filters = f.dim(3);
    const T* dy = d_out.data<T>();
    Tensor cols = ctx.allocate(DTypeOf<T>(), Shape{w.rows(), w.cols()});
    if (need[1]) {  // dW = cols^T * dY
      cpu::Im2Col(in[0].data<T>(), w, cols.data<T>());
      (*d_in)[1] = this->GradientLike(ctx, in, 1);
      Product<T>(ctx, true, false, w.cols(), filters, w.rows(), T(1), cols.data<T>(), dy, T(0),
                 (*d_in)[1].data<T>());
    }
    if (need[0]) {  // dCols = dY * W^T, then col2im
      Product<T>(ctx, false, true, w.rows(), w.cols(), filters, T(1), dy, in[1].data<T>(), T(0),
                 cols.data<T>());
      (*d_in)[0] = this->GradientLike(ctx, in, 0);
      cpu::Col2Im(cols.data<T>(), w, (*d_in)[0].data<T>());
    }
    return absl::OkStatus();
  }
};

template <typename T>
class MaxPool2DKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    cpu::MaxPool(in[0].data<T>(), PoolWindow(this->node_, in[0].shape()), out->data<T>());
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    Tensor g = this->GradientLike(ctx, in, 0);
    cpu::MaxPoolGrad(in[0].data<T>(), PoolWindow(this->node_, in[0].shape()), d_out.data<T>(),
                     g.data<T>());
    (*d_in)[0] = g;
    return absl::OkStatus();
  }
};

// The CPU's window geometry as the device kernels take it.
gpu::WindowGeometry OnDevice(const cpu::Window& w) {
  gpu::WindowGeometry g;
  g.n = w.n, g.h = w.h, g.w = w.w, g.c = w.c;
  g.kh = w.kh, g.kw = w.kw, g.sh = w.sh, g.sw = w.sw, g.oh = w.oh, g.ow = w.ow;
  g.pad_top = w.pad_top, g.pad_left = w.pad_left;
  return g;
}

// The CPU kernel's products through BlasApi: Y = im2col(X) W; dW = cols^T dY (first, handed
// out at once as MATMUL's dB is); dX = col2im(dY W^T).
class Conv2DGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                       absl::Span<const Tensor> in, Tensor* out) override {
    const Shape& f = in[1].shape();
    const gpu::WindowGeometry w =
        OnDevice(cpu::MakeWindow(in[0].shape(), f.dim(0), f.dim(1), node_));
    if (out->num_elements() == 0) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN(Tensor cols, Allocate(ctx, DType::kF32, Shape{w.rows(), w.cols()}));
    LS_RETURN_IF_ERROR(gpu.kernels->Im2Col(F32(in[0]), w, F32(cols), gpu.stream()));
    gpu::GemmArgs g;
    g.m = w.rows();
    g.n = f.dim(3);
    g.k = w.cols();
    g.a = F32(cols);
    g.b = F32(in[1]);
    g.c = F32(*out);
    return GpuProduct(ctx, gpu, g);
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    const Shape& f = in[1].shape();
    const gpu::WindowGeometry w =
        OnDevice(cpu::MakeWindow(in[0].shape(), f.dim(0), f.dim(1), node_));
    const int64_t filters = f.dim(3);
    LS_ASSIGN_OR_RETURN(Tensor cols, Allocate(ctx, DType::kF32, Shape{w.rows(), w.cols()}));
    if (need[1]) {  // dW [kh*kw*c, filters] = cols^T dY
      LS_ASSIGN_OR_RETURN((*d_in)[1], GradientLike(ctx, in, 1));
      if (w.rows() == 0) {  // no examples: no product (k = 0), a zero gradient
        LS_RETURN_IF_ERROR(gpu.context->Zero(F32((*d_in)[1]), (*d_in)[1].num_bytes()));
      } else {
        LS_RETURN_IF_ERROR(gpu.kernels->Im2Col(F32(in[0]), w, F32(cols), gpu.stream()));
        gpu::GemmArgs g;
        g.trans_a = true;
        g.m = w.cols();
        g.n = filters;
        g.k = w.rows();
        g.a = F32(cols);
        g.b = F32(d_out);
        g.c = F32((*d_in)[1]);
        LS_RETURN_IF_ERROR(GpuProduct(ctx, gpu, g));
      }
      ctx.InputGradientDone(1);
    }
    if (need[0]) {  // dCols [rows, kh*kw*c] = dY W^T, then col2im
      LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
      if (w.rows() > 0) {
        gpu::GemmArgs g;
        g.trans_b = true;
        g.m = w.rows();
        g.n = w.cols();
        g.k = filters;
        g.a = F32(d_out);
        g.b = F32(in[1]);
        g.c = F32(cols);
        LS_RETURN_IF_ERROR(GpuProduct(ctx, gpu, g));
      }
      LS_RETURN_IF_ERROR(gpu.kernels->Col2Im(F32(cols), w, F32((*d_in)[0]), gpu.stream()));
    }
    return absl::OkStatus();
  }
};

class MaxPool2DGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext&, const gpu::GpuDevice& gpu, absl::Span<const Tensor> in,
                       Tensor* out) override {
    return gpu.kernels->MaxPool(F32(in[0]), OnDevice(PoolWindow(node_, in[0].shape())), F32(*out),
                                gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
    return gpu.kernels->MaxPoolGrad(F32(in[0]), OnDevice(PoolWindow(node_, in[0].shape())),
                                    F32(d_out), F32((*d_in)[0]), gpu.stream());
  }
};

}  // namespace

void RegisterWindowOps(OpRegistry* r) {
  MustRegister(r, WithCuda<Conv2DGpuKernel>(CpuOp<Conv2DKernel>(v1::CONV2D, 2, WindowShape)));
  MustRegister(
      r, WithCuda<MaxPool2DGpuKernel>(CpuOp<MaxPool2DKernel>(v1::MAX_POOL2D, 1, WindowShape)));
}

}  // namespace lockstep::engine
