// SPARSE_SOFTMAX_CROSS_ENTROPY (logits [b, c], integer labels [b] -> mean loss; or logits
// [b, t, ..., c] with labels [b, t, ...]: one class per position, e.g. a language model's next
// token, the mean over all positions; node.label_smoothing eps makes the target
// (1 - eps) * one_hot + eps / classes), ACCURACY (same inputs -> fraction correct, f32, no
// gradient) and MEAN_SQUARED_ERROR
// (predictions, targets of one shape -> mean loss).
#include "engine/gpu/device_tensor.h"
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> LogitsLabelsShape(const v1::NodeDef& node,
                                             const std::vector<TypedShape>& in) {
  const Shape &logits = in[0].shape, &labels = in[1].shape;
  if (!IsFloat(in[0].dtype)) return ShapeError(node, "logits must be f32 or f64");
  if (!IsInt(in[1].dtype)) return ShapeError(node, "labels must be i32 or i64");
  bool ok = logits.rank() >= 2 && labels.rank() == logits.rank() - 1;
  for (int i = 0; ok && i < labels.rank(); ++i) ok = DimsCompatible(logits.dim(i), labels.dim(i));
  if (!ok) {
    return ShapeError(node, absl::StrCat("needs logits [batch, ..., classes] and labels "
                                         "[batch, ...] (one label per row), got ",
                                         logits.ToString(), " and ", labels.ToString()));
  }
  if (!(node.label_smoothing() >= 0 && node.label_smoothing() <= 1)) {
    return ShapeError(
        node, absl::StrCat("label_smoothing ", node.label_smoothing(), " is not in [0, 1]"));
  }
  return TypedShape{Shape{}, node.op() == v1::ACCURACY ? DType::kF32 : in[0].dtype};
}

absl::StatusOr<TypedShape> MseShape(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatShapes(node, in));
  return TypedShape{Shape{}, in[0].dtype};
}

// Rows of logits (positions with a label) and classes: [b, ..., c] is [rows, c].
std::pair<int64_t, int64_t> RowsAndClasses(const Tensor& logits) {
  const int64_t c = logits.shape().dim(logits.shape().rank() - 1);
  return {c == 0 ? 0 : logits.num_elements() / c, c};
}

absl::Status CheckLabels(const v1::NodeDef& node, const Tensor& labels, int64_t classes) {
  for (int64_t i = 0; i < labels.num_elements(); ++i) {
    int64_t l = cpu::LabelAt(labels, i);
    if (l < 0 || l >= classes) {
      return absl::InvalidArgumentError(absl::StrCat(
          node.name(), ": label ", l, " at ",
          labels.shape().rank() == 1 ? "batch row " : "flattened position ", i, " is outside [0, ",
          classes, "); check the data's label column and the model's output units"));
    }
  }
  return absl::OkStatus();
}

template <typename T>
class SparseSoftmaxCrossEntropyKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const auto [b, c] = RowsAndClasses(in[0]);
    LS_RETURN_IF_ERROR(CheckLabels(this->node_, in[1], c));
    const T* x = in[0].data<T>();
    const double eps = this->node_.label_smoothing();
    double total = 0;
    for (int64_t r = 0; r < b; ++r) {
      const T* row = x + r * c;
      T m = *std::max_element(row, row + c);
      double s = 0, sum = 0;
      for (int64_t j = 0; j < c; ++j) {
        s += std::exp(double(row[j] - m));
        sum += row[j];
      }
      // -sum_j target_j * log softmax_j, the targets summing to 1.
      total += std::log(s) + m - (1 - eps) * row[cpu::LabelAt(in[1], r)];
      if (eps != 0) total -= eps / c * sum;
    }
    out->data<T>()[0] = b == 0 ? T(0) : T(total / b);
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    const auto [b, c] = RowsAndClasses(in[0]);
    Tensor g = this->GradientLike(ctx, in, 0);
    T* gx = g.data<T>();
    const T* x = in[0].data<T>();
    const T scale = b == 0 ? T(0) : d_out.data<T>()[0] / T(b);
    const T eps = T(this->node_.label_smoothing()), spread = c == 0 ? T(0) : eps / T(c);
    for (int64_t r = 0; r < b; ++r) {
      cpu::SoftmaxRow(x + r * c, c, gx + r * c);  // softmax - target
      gx[r * c + cpu::LabelAt(in[1], r)] -= T(1) - eps;
      if (eps != T(0)) {
        for (int64_t j = 0; j < c; ++j) gx[r * c + j] -= spread;
      }
      for (int64_t j = 0; j < c; ++j) gx[r * c + j] *= scale;
    }
    (*d_in)[0] = g;
    return absl::OkStatus();
  }
};

template <typename T>
class AccuracyKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const auto [b, c] = RowsAndClasses(in[0]);
    const T* x = in[0].data<T>();
    int64_t correct = 0;
    for (int64_t r = 0; r < b; ++r) {
      int64_t best = std::max_element(x + r * c, x + (r + 1) * c) - (x + r * c);
      correct += best == cpu::LabelAt(in[1], r);
    }
    out->data<float>()[0] = b == 0 ? 0.f : float(correct) / float(b);
    return absl::OkStatus();
  }
};

template <typename T>
class MeanSquaredErrorKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    const T *x = in[0].data<T>(), *t = in[1].data<T>();
    const int64_t n = in[0].num_elements();
    double total = 0;
    for (int64_t i = 0; i < n; ++i) total += double(x[i] - t[i]) * (x[i] - t[i]);
    out->data<T>()[0] = n == 0 ? T(0) : T(total / n);
    return absl::OkStatus();
  }

  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    const T *a = in[0].data<T>(), *b = in[1].data<T>();
    const int64_t n = in[0].num_elements();
    for (int i = 0; i < 2; ++i) {
      if (!need[i]) continue;
      Tensor g = this->GradientLike(ctx, in, i);
      T* gi = g.data<T>();
      const T s = (i == 0 ? T(2) : T(-2)) * d_out.data<T>()[0] / T(std::max<int64_t>(n, 1));
      for (int64_t j = 0; j < n; ++j) gi[j] = s * (a[j] - b[j]);
      (*d_in)[i] = g;
    }
    return absl::OkStatus();
  }
};

// SPARSE_SOFTMAX_CROSS_ENTROPY and ACCURACY on a GPU (GpuKernels). The kernels clamp an
// out-of-range label (no read outside the logits); the loss's forward pass checks the labels
// on the device (GpuKernels::CheckLabels) into a flag the executor reads back with the step's
// results (KernelContext::defer_device_check), so the step does not wait for the device in
// its middle. A bad label fails the step there with the CPU kernel's message: only then are
// the labels copied back, to name the first. Without the executor's deferral (a kernel run
// alone) the check copies the labels back and waits, as the CPU kernel checks before it runs.
class LogitsLabelsGpuKernel : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status CheckLabelsOnDevice(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                                   const Tensor& labels, int64_t classes) const {
    if (!ctx.defer_device_check) {
      LS_ASSIGN_OR_RETURN(Tensor host, gpu::CopyToHost(*gpu.context, labels));
      return CheckLabels(node_, host, classes);
    }
    LS_ASSIGN_OR_RETURN(Tensor flag, Allocate(ctx, DType::kI64, Shape{1}));
    LS_RETURN_IF_ERROR(gpu.kernels->CheckLabels(labels.raw_device_data(), I64(labels),
                                                flag.device_data<int64_t>(), labels.num_elements(),
                                                classes, gpu.stream()));
    gpu::DeviceContext* context = gpu.context;
    ctx.defer_device_check(
        std::move(flag), [this, context, labels, classes](int64_t) -> absl::Status {
          LS_ASSIGN_OR_RETURN(Tensor host, gpu::CopyToHost(*context, labels));
          absl::Status s = CheckLabels(node_, host, classes);
          if (!s.ok()) return s;
          return absl::InternalError(absl::StrCat(
              node_.name(), ": the device's label check failed, the labels copied back pass it"));
        });
    return absl::OkStatus();
  }
  static bool I64(const Tensor& labels) { return labels.dtype() == DType::kI64; }
};

class SparseSoftmaxCrossEntropyGpuKernel final : public LogitsLabelsGpuKernel {
 public:
  using LogitsLabelsGpuKernel::LogitsLabelsGpuKernel;

 protected:
  absl::Status Compute(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                       absl::Span<const Tensor> in, Tensor* out) override {
    const auto [b, c] = RowsAndClasses(in[0]);
    LS_RETURN_IF_ERROR(CheckLabelsOnDevice(ctx, gpu, in[1], c));
    LS_ASSIGN_OR_RETURN(Tensor terms, Allocate(ctx, DType::kF64, Shape{b}));
    return gpu.kernels->SoftmaxCrossEntropy(F32(in[0]), in[1].raw_device_data(), I64(in[1]),
                                            terms.device_data<double>(), F32(*out), b, c,
                                            node_.label_smoothing(), gpu.stream());
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (!need[0]) return absl::OkStatus();
    const auto [b, c] = RowsAndClasses(in[0]);
    LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
    return gpu.kernels->SoftmaxCrossEntropyGrad(
        F32(in[0]), in[1].raw_device_data(), I64(in[1]), F32(d_out), F32((*d_in)[0]), b, c,
        static_cast<float>(node_.label_smoothing()), gpu.stream());
  }
};

class AccuracyGpuKernel final : public LogitsLabelsGpuKernel {
 public:
  using LogitsLabelsGpuKernel::LogitsLabelsGpuKernel;

 protected:
  absl::Status Compute(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                       absl::Span<const Tensor> in, Tensor* out) override {
    const auto [b, c] = RowsAndClasses(in[0]);
    LS_ASSIGN_OR_RETURN(Tensor hits, Allocate(ctx, DType::kI32, Shape{b}));
    return gpu.kernels->Accuracy(F32(in[0]), in[1].raw_device_data(), I64(in[1]),
                                 hits.device_data<int32_t>(), F32(*out), b, c, gpu.stream());
  }
};

}  // namespace

void RegisterLosses(OpRegistry* r) {
  MustRegister(r,
               WithCuda<SparseSoftmaxCrossEntropyGpuKernel>(CpuOp<SparseSoftmaxCrossEntropyKernel>(
                   v1::SPARSE_SOFTMAX_CROSS_ENTROPY, 2, LogitsLabelsShape)));
  MustRegister(
      r, WithCuda<AccuracyGpuKernel>(CpuOp<AccuracyKernel>(v1::ACCURACY, 2, LogitsLabelsShape)));
  MustRegister(r, CpuOp<MeanSquaredErrorKernel>(v1::MEAN_SQUARED_ERROR, 2, MseShape));
}

}  // namespace lockstep::engine
