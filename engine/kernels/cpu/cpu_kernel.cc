#include "engine/kernels/cpu/cpu_kernel.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/kernels/cpu/blas.h"
#include "engine/kernels/cpu/window_ops.h"
#include "engine/philox.h"
#include "engine/shape_inference.h"

namespace lockstep::engine {
namespace {

int64_t LabelAt(const Tensor& labels, int64_t i) {
  return labels.dtype() == DType::kI32 ? labels.data<int32_t>()[i] : labels.data<int64_t>()[i];
}

absl::Status CheckLabels(const v1::NodeDef& node, const Tensor& labels, int64_t classes) {
  for (int64_t i = 0; i < labels.num_elements(); ++i) {
    int64_t l = LabelAt(labels, i);
    if (l < 0 || l >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(node.name(), ": label ", l, " at batch row ", i, " is outside [0, ", classes,
                       "); check the data's label column and the model's output units"));
    }
  }
  return absl::OkStatus();
}

// For SUM/MEAN: the output index of every input element (reduced axes have stride 0).
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
class CpuKernel final : public OpKernel {
 public:
  explicit CpuKernel(const v1::NodeDef& node) : node_(node) {}

  absl::Status Forward(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    std::vector<TypedShape> shapes;
    for (const Tensor& t : in) shapes.push_back(TypedShape{t.shape(), t.dtype()});
    LS_ASSIGN_OR_RETURN(TypedShape ts, InferOutput(node_, shapes));
    const v1::OpType op = node_.op();
    if (op == v1::RESHAPE || op == v1::FLATTEN) {
      LS_ASSIGN_OR_RETURN(*out, in[0].Reshaped(ts.shape));
      return absl::OkStatus();
    }
    if (op == v1::DROPOUT && (!ctx.training || node_.rate() == 0)) {
      *out = in[0];
      return absl::OkStatus();
    }
    *out = ctx.allocate(ts.dtype, ts.shape);
    T* y = ts.dtype == DTypeOf<T>() ? out->data<T>() : nullptr;
    const T* x = in[0].data<T>();
    const int64_t n = in[0].num_elements();
    switch (op) {
      case v1::MATMUL: {
        const Shape &a = in[0].shape(), &b = in[1].shape();
        cpu::Gemm<T>(false, false, a.dim(0), b.dim(1), a.dim(1), T(1), x, in[1].data<T>(), T(0), y);
        break;
      }
      case v1::ADD:
      case v1::SUB:
      case v1::MUL: {
        const T* b = in[1].data<T>();
        if (op == v1::ADD)
          for (int64_t i = 0; i < n; ++i) y[i] = x[i] + b[i];
        if (op == v1::SUB)
          for (int64_t i = 0; i < n; ++i) y[i] = x[i] - b[i];
        if (op == v1::MUL)
          for (int64_t i = 0; i < n; ++i) y[i] = x[i] * b[i];
        break;
      }
      case v1::BIAS_ADD: {
        const T* b = in[1].data<T>();
        const int64_t c = in[1].num_elements();
        for (int64_t r = 0; r < n / std::max<int64_t>(c, 1); ++r) {
          for (int64_t j = 0; j < c; ++j) y[r * c + j] = x[r * c + j] + b[j];
        }
        break;
      }
      case v1::RELU:
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
        break;
      case v1::SIGMOID:
        for (int64_t i = 0; i < n; ++i) y[i] = T(1) / (T(1) + std::exp(-x[i]));
        break;
      case v1::TANH:
        for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
        break;
      case v1::SOFTMAX: {
        const int64_t c = in[0].shape()[-1];
        for (int64_t r = 0; c > 0 && r < n / c; ++r) Softmax(x + r * c, c, y + r * c);
        break;
      }
      case v1::SPARSE_SOFTMAX_CROSS_ENTROPY: {
        const int64_t b = in[0].shape().dim(0), c = in[0].shape().dim(1);
        LS_RETURN_IF_ERROR(CheckLabels(node_, in[1], c));
        double total = 0;
        for (int64_t r = 0; r < b; ++r) {
          const T* row = x + r * c;
          T m = *std::max_element(row, row + c);
          double s = 0;
          for (int64_t j = 0; j < c; ++j) s += std::exp(double(row[j] - m));
          total += std::log(s) + m - row[LabelAt(in[1], r)];
        }
        y[0] = b == 0 ? T(0) : T(total / b);
        break;
      }
      case v1::MEAN_SQUARED_ERROR: {
        const T* t = in[1].data<T>();
        double total = 0;
        for (int64_t i = 0; i < n; ++i) total += double(x[i] - t[i]) * (x[i] - t[i]);
        y[0] = n == 0 ? T(0) : T(total / n);
        break;
      }
      case v1::SUM:
      case v1::MEAN: {
        std::fill(y, y + out->num_elements(), T(0));
        ForEachReduced(in[0].shape(), NormalizedAxes(node_, in[0].shape().rank()),
                       [&](int64_t i, int64_t o) { y[o] += x[i]; });
        if (op == v1::MEAN && out->num_elements() > 0) {
          T scale = T(out->num_elements()) / T(std::max<int64_t>(n, 1));
          for (int64_t i = 0; i < out->num_elements(); ++i) y[i] *= scale;
        }
        break;
      }
      case v1::CONV2D: {
        const Shape& f = in[1].shape();
        cpu::Window w = cpu::MakeWindow(in[0].shape(), f.dim(0), f.dim(1), node_);
        Tensor cols = ctx.allocate(DTypeOf<T>(), Shape{w.rows(), w.cols()});
        cpu::Im2Col(x, w, cols.data<T>());
        cpu::Gemm<T>(false, false, w.rows(), f.dim(3), w.cols(), T(1), cols.data<T>(),
                     in[1].data<T>(), T(0), y);
        break;
      }
      case v1::MAX_POOL2D:
        cpu::MaxPool(x, PoolWindow(in[0].shape()), y);
        break;
      case v1::DROPOUT: {
        const T scale = T(1) / (T(1) - T(node_.rate()));
        ForEachKept(ctx, n, [&](int64_t i, bool keep) { y[i] = keep ? x[i] * scale : T(0); });
        break;
      }
      case v1::ARGMAX: {
        const int64_t c = in[0].shape()[-1];
        int64_t* idx = out->data<int64_t>();
        for (int64_t r = 0; c > 0 && r < n / c; ++r) {
          idx[r] = std::max_element(x + r * c, x + (r + 1) * c) - (x + r * c);
        }
        break;
      }
      case v1::ACCURACY: {
        const int64_t b = in[0].shape().dim(0), c = in[0].shape().dim(1);
        int64_t correct = 0;
        for (int64_t r = 0; r < b; ++r) {
          int64_t best = std::max_element(x + r * c, x + (r + 1) * c) - (x + r * c);
          correct += best == LabelAt(in[1], r);
        }
        out->data<float>()[0] = b == 0 ? 0.f : float(correct) / float(b);
        break;
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("no CPU kernel for ", v1::OpType_Name(op), " node ", node_.name()));
    }
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor& out,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    const v1::OpType op = node_.op();
    const T* dy = d_out.data<T>();
    const int64_t n = in.empty() ? 0 : in[0].num_elements();
    auto alloc_like = [&](int i) {
      return ctx.AllocateInputGradient(i, DTypeOf<T>(), in[i].shape());
    };
    switch (op) {
      case v1::MATMUL: {
        const Shape &a = in[0].shape(), &b = in[1].shape();
        const int64_t m = a.dim(0), k = a.dim(1), nn = b.dim(1);
        // dB first: B is usually the weights, and their gradient can then be all-reduced
        // while dA is computed (KernelContext::InputGradientDone).
        if (need[1]) {  // dB = A^T * dC
          (*d_in)[1] = alloc_like(1);
          cpu::Gemm<T>(true, false, k, nn, m, T(1), in[0].data<T>(), dy, T(0),
                       (*d_in)[1].data<T>());
          ctx.InputGradientDone(1);
        }
        if (need[0]) {  // dA = dC * B^T
          (*d_in)[0] = alloc_like(0);
          cpu::Gemm<T>(false, true, m, k, nn, T(1), dy, in[1].data<T>(), T(0),
                       (*d_in)[0].data<T>());
        }
        return absl::OkStatus();
      }
      case v1::ADD:
      case v1::SUB:
      case v1::MUL:
      case v1::MEAN_SQUARED_ERROR:
        for (int i = 0; i < 2; ++i) {
          if (!need[i]) continue;
          if (op == v1::ADD || (op == v1::SUB && i == 0)) {
            (*d_in)[i] = d_out;
            continue;
          }
          Tensor g = alloc_like(i);
          T* gi = g.data<T>();
          const T *a = in[0].data<T>(), *b = in[1].data<T>();
          if (op == v1::SUB)
            for (int64_t j = 0; j < n; ++j) gi[j] = -dy[j];
          if (op == v1::MUL) {
            const T* other = in[1 - i].data<T>();
            for (int64_t j = 0; j < n; ++j) gi[j] = dy[j] * other[j];
          }
          if (op == v1::MEAN_SQUARED_ERROR) {
            const T s = (i == 0 ? T(2) : T(-2)) * dy[0] / T(std::max<int64_t>(n, 1));
            for (int64_t j = 0; j < n; ++j) gi[j] = s * (a[j] - b[j]);
          }
          (*d_in)[i] = g;
        }
        return absl::OkStatus();
      case v1::BIAS_ADD: {
        if (need[0]) (*d_in)[0] = d_out;
        if (need[1]) {
          Tensor g = alloc_like(1);
          T* gb = g.data<T>();
          const int64_t c = in[1].num_elements();
          std::fill(gb, gb + c, T(0));
          for (int64_t r = 0; r < n / std::max<int64_t>(c, 1); ++r) {
            for (int64_t j = 0; j < c; ++j) gb[j] += dy[r * c + j];
          }
          (*d_in)[1] = g;
        }
        return absl::OkStatus();
      }
      case v1::SPARSE_SOFTMAX_CROSS_ENTROPY: {
        if (!need[0]) return absl::OkStatus();
        const int64_t b = in[0].shape().dim(0), c = in[0].shape().dim(1);
        Tensor g = alloc_like(0);
        T* gx = g.data<T>();
        const T* x = in[0].data<T>();
        const T scale = b == 0 ? T(0) : dy[0] / T(b);
        for (int64_t r = 0; r < b; ++r) {
          Softmax(x + r * c, c, gx + r * c);
          gx[r * c + LabelAt(in[1], r)] -= T(1);
          for (int64_t j = 0; j < c; ++j) gx[r * c + j] *= scale;
        }
        (*d_in)[0] = g;
        return absl::OkStatus();
      }
      case v1::RESHAPE:
      case v1::FLATTEN: {
        LS_ASSIGN_OR_RETURN((*d_in)[0], d_out.Reshaped(in[0].shape()));
        return absl::OkStatus();
      }
      case v1::CONV2D: {
        const Shape& f = in[1].shape();
        cpu::Window w = cpu::MakeWindow(in[0].shape(), f.dim(0), f.dim(1), node_);
        const int64_t filters = f.dim(3);
        Tensor cols = ctx.allocate(DTypeOf<T>(), Shape{w.rows(), w.cols()});
        if (need[1]) {  // dW = cols^T * dY
          cpu::Im2Col(in[0].data<T>(), w, cols.data<T>());
          (*d_in)[1] = alloc_like(1);
          cpu::Gemm<T>(true, false, w.cols(), filters, w.rows(), T(1), cols.data<T>(), dy, T(0),
                       (*d_in)[1].data<T>());
        }
        if (need[0]) {  // dCols = dY * W^T, then col2im
          cpu::Gemm<T>(false, true, w.rows(), w.cols(), filters, T(1), dy, in[1].data<T>(), T(0),
                       cols.data<T>());
          (*d_in)[0] = alloc_like(0);
          cpu::Col2Im(cols.data<T>(), w, (*d_in)[0].data<T>());
        }
        return absl::OkStatus();
      }
      default:
        break;
    }
    // One-input ops.
    if (!need[0]) return absl::OkStatus();
    if (op == v1::DROPOUT && (!ctx.training || node_.rate() == 0)) {
      (*d_in)[0] = d_out;
      return absl::OkStatus();
    }
    Tensor g = alloc_like(0);
    T* gx = g.data<T>();
    const T* x = in[0].data<T>();
    const T* y = out.data<T>();
    switch (op) {
      case v1::RELU:
        for (int64_t i = 0; i < n; ++i) gx[i] = x[i] > T(0) ? dy[i] : T(0);
        break;
      case v1::SIGMOID:
        for (int64_t i = 0; i < n; ++i) gx[i] = dy[i] * y[i] * (T(1) - y[i]);
        break;
      case v1::TANH:
        for (int64_t i = 0; i < n; ++i) gx[i] = dy[i] * (T(1) - y[i] * y[i]);
        break;
      case v1::SOFTMAX: {
        const int64_t c = in[0].shape()[-1];
        for (int64_t r = 0; c > 0 && r < n / c; ++r) {
          T dot = 0;
          for (int64_t j = 0; j < c; ++j) dot += dy[r * c + j] * y[r * c + j];
          for (int64_t j = 0; j < c; ++j) gx[r * c + j] = y[r * c + j] * (dy[r * c + j] - dot);
        }
        break;
      }
      case v1::SUM:
      case v1::MEAN: {
        T scale = T(1);
        if (op == v1::MEAN) scale = T(out.num_elements()) / T(std::max<int64_t>(n, 1));
        ForEachReduced(in[0].shape(), NormalizedAxes(node_, in[0].shape().rank()),
                       [&](int64_t i, int64_t o) { gx[i] = dy[o] * scale; });
        break;
      }
      case v1::MAX_POOL2D:
        cpu::MaxPoolGrad(x, PoolWindow(in[0].shape()), dy, gx);
        break;
      case v1::DROPOUT: {
        const T scale = T(1) / (T(1) - T(node_.rate()));
        ForEachKept(ctx, n, [&](int64_t i, bool keep) { gx[i] = keep ? dy[i] * scale : T(0); });
        break;
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat(v1::OpType_Name(op), " node ", node_.name(),
                         " has no gradient; it cannot lie "
                         "between a trainable variable and the loss"));
    }
    (*d_in)[0] = g;
    return absl::OkStatus();
  }

 private:
  static void Softmax(const T* x, int64_t c, T* y) {
    T m = *std::max_element(x, x + c);
    T s = 0;
    for (int64_t j = 0; j < c; ++j) s += (y[j] = std::exp(x[j] - m));
    for (int64_t j = 0; j < c; ++j) y[j] /= s;
  }

  cpu::Window PoolWindow(const Shape& x) const {
    int kh = node_.window().empty() ? 2 : node_.window(0);
    int kw = node_.window().empty() ? 2 : node_.window(node_.window_size() - 1);
    v1::NodeDef geometry = node_;
    if (geometry.strides().empty()) {  // pooling strides default to the window
      geometry.add_strides(kh);
      geometry.add_strides(kw);
    }
    return cpu::MakeWindow(x, kh, kw, geometry);
  }

  // Dropout's keep mask: element i is kept when its Philox uniform >= rate.
  template <typename Fn>
  void ForEachKept(const KernelContext& ctx, int64_t n, Fn fn) const {
    Philox rng(MixKey(ctx.dropout_key, static_cast<uint64_t>(ctx.node_index)));
    const double rate = node_.rate();
    for (int64_t base = 0; base < n; base += 4) {
      Philox::Block block = rng.Generate(static_cast<uint64_t>(base / 4));
      for (int64_t j = 0; j < 4 && base + j < n; ++j) {
        fn(base + j, block[j] * (1.0 / 4294967296.0) >= rate);
      }
    }
  }

  v1::NodeDef node_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<OpKernel>> CreateCpuKernel(const v1::NodeDef& node,
                                                          DType compute_dtype) {
  if (node.op() == v1::INPUT || node.op() == v1::VARIABLE) {
    return absl::InvalidArgumentError(
        absl::StrCat(v1::OpType_Name(node.op()), " node ", node.name(), " has no kernel"));
  }
  if (compute_dtype == DType::kF32) return std::make_unique<CpuKernel<float>>(node);
  if (compute_dtype == DType::kF64) return std::make_unique<CpuKernel<double>>(node);
  return absl::InvalidArgumentError(absl::StrCat(
      "node ", node.name(), ": CPU kernels compute in f32 or f64, not ", DTypeName(compute_dtype)));
}

}  // namespace lockstep::engine
