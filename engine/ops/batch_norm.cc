// BATCH_NORM: (x [..., c], gamma, beta, moving_mean, moving_variance, all [c]) -> x
// normalised per channel. Training: with the batch's mean and (biased) variance over every
// axis but the last, reporting the moving statistics' updates
// (1 - momentum) * (batch - moving) through KernelContext::UpdateState; otherwise with the
// moving statistics. With node.virtual_batch_size V > 0, training normalizes each group of V
// consecutive examples with its own statistics, and "batch" above is the groups' mean. With
// node.synchronized, training, "batch" is the global batch (KernelContext::cross_replica_sum
// sums over the replicas; alone, a replica's batch): the count and sums of x, then the
// squared deviations from the global mean, are summed in f64 over the replicas (two passes,
// not E[x^2] - mean^2), and the backward pass sums dy and dy * xhat likewise; gamma's and
// beta's gradients stay this replica's share, which the gradient all-reduce adds up. The moving
// statistics take no gradient.
//
// The CUDA kernel makes the same computation (GpuKernels' BatchNorm, BatchNormMovingUpdates,
// BatchNormGrad), virtual batches included. Synchronized statistics in training on a GPU: the
// device computes this replica's per-channel f64 partial sums (SyncBatchNormSum,
// SyncBatchNormGradSums) in the CPU kernel's order, the op copies them to the host, sums them
// over the replicas there (cross_replica_sum works on host tensors) and copies what the device
// needs back; the host math between the passes is the CPU kernel's own (SyncStatistics,
// SyncGradientMeans), so the GPU gives the CPU's bits.
#include "engine/ops/builtin_ops.h"
#include "engine/ops/cpu_op_kernel.h"
#include "engine/ops/gpu_op_kernel.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<TypedShape> BatchNormShape(const v1::NodeDef& node,
                                          const std::vector<TypedShape>& in) {
  LS_RETURN_IF_ERROR(CheckSameFloatDTypes(node, in));
  const Shape& x = in[0].shape;
  if (x.rank() < 2) return ShapeError(node, "needs [batch, ..., channels]");
  static constexpr const char* kNames[] = {"", "gamma", "beta", "moving_mean", "moving_variance"};
  for (int k = 1; k < 5; ++k) {
    const Shape& p = in[k].shape;
    if (p.rank() != 1 || !DimsCompatible(p.dim(0), x[-1])) {
      return ShapeError(node, absl::StrCat(kNames[k], " ", p.ToString(),
                                           " does not match the last axis of ", x.ToString()));
    }
  }
  if (!(node.epsilon() > 0)) {
    return ShapeError(node, absl::StrCat("epsilon ", node.epsilon(), " must be > 0"));
  }
  if (!(node.momentum() >= 0 && node.momentum() < 1)) {
    return ShapeError(node, absl::StrCat("momentum ", node.momentum(), " is not in [0, 1)"));
  }
  if (node.synchronized() && node.virtual_batch_size() > 0) {
    return ShapeError(node, "synchronized statistics exclude virtual_batch_size groups");
  }
  return in[0];
}

// Synchronized training's host math between the cross-replica sums, shared by the CPU and the
// CUDA kernel (so both round the same f64 values to the same floats).
//
// The global batch's row count from the summed counts: FAILED_PRECONDITION naming the node
// when no replica of the sync group has examples.
absl::StatusOr<double> GlobalRows(const v1::NodeDef& node, double summed_rows) {
  if (!(summed_rows > 0)) {
    return absl::FailedPreconditionError(
        absl::StrCat(node.name(), ": no replica of the sync group has examples"));
  }
  return summed_rows;
}

// stats [3, c] (mean, variance, rstd) from the global sums of x and of (x - mean)^2.
template <typename T>
void SyncStatistics(const double* sum, const double* squares, double rows, double epsilon,
                    int64_t c, T* stats) {
  T *mean = stats, *var = mean + c, *rstd = var + c;
  for (int64_t j = 0; j < c; ++j) {
    mean[j] = T(sum[j] / rows);
    var[j] = T(squares[j] / rows);
    rstd[j] = T(1 / std::sqrt(squares[j] / rows + epsilon));
  }
}

// means [2, c] (mean dy, mean dy * xhat) from the global sums [2, c] of dy and dy * xhat.
template <typename T>
void SyncGradientMeans(const double* sums, double rows, int64_t c, T* means) {
  for (int64_t j = 0; j < 2 * c; ++j) means[j] = T(sums[j] / rows);
}

// Rows [begin, end) of [rows, c] that share statistics: a group of virtual_batch_size
// examples when training with virtual batches, else every row.
struct RowGroup {
  int64_t begin, end;
};

template <typename T>
class BatchNormKernel final : public CpuOpKernel<T> {
 public:
  using CpuOpKernel<T>::CpuOpKernel;

  absl::Status Compute(const KernelContext& ctx, absl::Span<const Tensor> in,
                       Tensor* out) override {
    if (Synchronized(ctx)) return ComputeSynchronized(ctx, in, out);
    const int64_t c = in[0].shape()[-1];
    const std::vector<RowGroup> groups = Groups(ctx.training, in[0]);
    Tensor stats = ctx.allocate(DTypeOf<T>(), Shape{3, c});   // mean, variance, rstd
    Tensor deltas = ctx.allocate(DTypeOf<T>(), Shape{2, c});  // sum of the groups' statistics
    T* sum_stats = deltas.data<T>();
    std::fill(sum_stats, sum_stats + 2 * c, T(0));
    const T *m = stats.data<T>(), *s = m + 2 * c;
    for (const RowGroup& g : groups) {
      Statistics(ctx.training, in, g, stats.data<T>());
      Normalize(in, g, m, s, out);
      for (int64_t j = 0; j < 2 * c; ++j) sum_stats[j] += m[j];
    }
    if (ctx.training && !groups.empty() && groups[0].end > 0) {
      ReportMovingUpdates(ctx, in, sum_stats, T(groups.size()));
    }
    return absl::OkStatus();
  }

  // Per channel j over a group's N rows, g = dy * gamma: dbeta = sum dy, dgamma = sum dy *
  // xhat (both summed over the groups); training: dx = rstd * (g - mean(g) - xhat * mean(g *
  // xhat)) with the group's statistics; otherwise dx = rstd * g.
  absl::Status Backward(const KernelContext& ctx, absl::Span<const Tensor> in, const Tensor&,
                        const Tensor& d_out, const std::vector<bool>& need,
                        std::vector<Tensor>* d_in) override {
    if (need[3] || need[4]) {
      return absl::InvalidArgumentError(absl::StrCat(
          this->node_.name(), ": the moving statistics take no gradient; make them non-trainable"));
    }
    if (Synchronized(ctx)) return BackwardSynchronized(ctx, in, d_out, need, d_in);
    const int64_t c = in[0].shape()[-1];
    const std::vector<RowGroup> groups = Groups(ctx.training, in[0]);
    Tensor stats = ctx.allocate(DTypeOf<T>(), Shape{3, c});  // mean, variance, rstd
    Tensor sums = ctx.allocate(DTypeOf<T>(), Shape{4, c});   // per group, then in all:
    const T *x = in[0].data<T>(), *gamma = in[1].data<T>(), *dy = d_out.data<T>();
    const T *m = stats.data<T>(), *s = m + 2 * c;
    T *sum_dy = sums.data<T>(), *sum_dyx = sum_dy + c;  // sum dy, sum dy * xhat
    T *total_dy = sum_dy + 2 * c, *total_dyx = sum_dy + 3 * c;
    std::fill(total_dy, total_dy + 2 * c, T(0));
    T* dx = nullptr;
    if (need[0]) {
      (*d_in)[0] = this->GradientLike(ctx, in, 0);
      dx = (*d_in)[0].data<T>();
    }
    for (const RowGroup& g : groups) {
      Statistics(ctx.training, in, g, stats.data<T>());
      std::fill(sum_dy, sum_dy + 2 * c, T(0));
      for (int64_t r = g.begin; r < g.end; ++r) {
        for (int64_t j = 0; j < c; ++j) {
          sum_dy[j] += dy[r * c + j];
          sum_dyx[j] += dy[r * c + j] * (x[r * c + j] - m[j]) * s[j];
        }
      }
      for (int64_t j = 0; j < 2 * c; ++j) total_dy[j] += sum_dy[j];
      if (dx == nullptr) continue;
      const T n = T(std::max<int64_t>(g.end - g.begin, 1));
      for (int64_t r = g.begin; r < g.end; ++r) {
        for (int64_t j = 0; j < c; ++j) {
          const T gr = dy[r * c + j] * gamma[j];
          if (!ctx.training) {
            dx[r * c + j] = s[j] * gr;
            continue;
          }
          const T xhat = (x[r * c + j] - m[j]) * s[j];
          dx[r * c + j] = s[j] * (gr - gamma[j] * (sum_dy[j] + xhat * sum_dyx[j]) / n);
        }
      }
    }
    for (int k = 1; k < 3; ++k) {
      if (!need[k]) continue;
      (*d_in)[k] = this->GradientLike(ctx, in, k);
      const T* src = k == 1 ? total_dyx : total_dy;
      std::copy(src, src + c, (*d_in)[k].template data<T>());
      ctx.InputGradientDone(k);
    }
    return absl::OkStatus();
  }

 private:
  // Synchronized statistics in training, over the sync group's replicas when there is one
  // (cross_replica_sum), else over this replica's batch by the same code.
  bool Synchronized(const KernelContext& ctx) const {
    return ctx.training && this->node_.synchronized();
  }

  // This replica's rows of x [batch, ..., c] seen as [rows, c]: none for a phantom batch.
  static int64_t LocalRows(const KernelContext& ctx, const Tensor& x) {
    const int64_t c = x.shape()[-1];
    return ctx.phantom_batch || c == 0 ? 0 : x.num_elements() / c;
  }

  // y = gamma * (x - mean) * rstd + beta over rows [g.begin, g.end) of x seen as [rows, c].
  void Normalize(absl::Span<const Tensor> in, RowGroup g, const T* mean, const T* rstd,
                 Tensor* out) const {
    const int64_t c = in[0].shape()[-1];
    const T *x = in[0].data<T>(), *gamma = in[1].data<T>(), *beta = in[2].data<T>();
    T* y = out->data<T>();
    for (int64_t r = g.begin; r < g.end; ++r) {
      for (int64_t j = 0; j < c; ++j) {
        y[r * c + j] = gamma[j] * ((x[r * c + j] - mean[j]) * rstd[j]) + beta[j];
      }
    }
  }

  // The moving statistics' updates (1 - momentum) * (batch - moving), "batch" being
  // batch_stats [2, c] (mean, then variance) divided by `divisor`.
  void ReportMovingUpdates(const KernelContext& ctx, absl::Span<const Tensor> in,
                           const T* batch_stats, T divisor) const {
    const int64_t c = in[0].shape()[-1];
    const T keep = T(this->node_.momentum());
    for (int k = 3; k < 5; ++k) {
      Tensor delta = ctx.allocate(DTypeOf<T>(), Shape{c});
      const T* moving = in[k].data<T>();
      const T* batch = batch_stats + (k - 3) * c;
      for (int64_t j = 0; j < c; ++j) {
        delta.data<T>()[j] = (T(1) - keep) * (batch[j] / divisor - moving[j]);
      }
      ctx.UpdateState(k, std::move(delta));
    }
  }

  // Training over the global batch: the statistics (kept for Backward, which this replica's
  // thread calls next) from sums over every replica. The sums accumulate in f64, so the
  // global batch's statistics round to the same T values however the batch is split over
  // replicas (a split only reorders f64 additions).
  absl::Status ComputeSynchronized(const KernelContext& ctx, absl::Span<const Tensor> in,
                                   Tensor* out) {
    const int64_t c = in[0].shape()[-1], rows = LocalRows(ctx, in[0]);
    const T* x = in[0].data<T>();
    Tensor sums = ctx.allocate(DType::kF64, Shape{c + 1});  // sum x per channel, then rows
    double* sum = sums.data<double>();
    std::fill(sum, sum + c + 1, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < c; ++j) sum[j] += x[r * c + j];
    }
    sum[c] = static_cast<double>(rows);
    LS_RETURN_IF_ERROR(ctx.SumOverReplicas(&sums));
    LS_ASSIGN_OR_RETURN(global_rows_, GlobalRows(this->node_, sum[c]));
    Tensor squares = ctx.allocate(DType::kF64, Shape{c});  // squared deviations
    double* sq = squares.data<double>();
    std::fill(sq, sq + c, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < c; ++j) {
        const double d = x[r * c + j] - sum[j] / global_rows_;
        sq[j] += d * d;
      }
    }
    LS_RETURN_IF_ERROR(ctx.SumOverReplicas(&squares));
    sync_stats_.assign(3 * c, T(0));  // mean, variance, rstd
    SyncStatistics(sum, sq, global_rows_, this->node_.epsilon(), c, sync_stats_.data());
    const T *mean = sync_stats_.data(), *rstd = mean + 2 * c;
    Normalize(in, {0, c == 0 ? 0 : in[0].num_elements() / c}, mean, rstd, out);
    // Every replica computes the same update; the gradient all-reduce averages it.
    ReportMovingUpdates(ctx, in, mean, T(1));
    return absl::OkStatus();
  }

  // dx = rstd * (g - gamma * (SUM dy + xhat * SUM dy * xhat) / N) with the sums (f64) and N
  // over the global batch; dgamma and dbeta are this replica's sums (a phantom batch's are
  // zero), which the gradient all-reduce adds up.
  absl::Status BackwardSynchronized(const KernelContext& ctx, absl::Span<const Tensor> in,
                                    const Tensor& d_out, const std::vector<bool>& need,
                                    std::vector<Tensor>* d_in) {
    const int64_t c = in[0].shape()[-1], rows = LocalRows(ctx, in[0]);
    if (static_cast<int64_t>(sync_stats_.size()) != 3 * c) {
      return absl::InternalError(
          absl::StrCat(this->node_.name(), ": backward pass without a forward pass"));
    }
    const T *x = in[0].data<T>(), *gamma = in[1].data<T>(), *dy = d_out.data<T>();
    const T *mean = sync_stats_.data(), *rstd = mean + 2 * c;
    Tensor sums = ctx.allocate(DType::kF64, Shape{2, c});  // sum dy, sum dy * xhat
    double *sum_dy = sums.data<double>(), *sum_dyx = sum_dy + c;
    std::fill(sum_dy, sum_dy + 2 * c, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < c; ++j) {
        sum_dy[j] += dy[r * c + j];
        sum_dyx[j] += dy[r * c + j] * ((x[r * c + j] - mean[j]) * rstd[j]);
      }
    }
    for (int k = 1; k < 3; ++k) {
      if (!need[k]) continue;
      (*d_in)[k] = this->GradientLike(ctx, in, k);
      const double* src = k == 1 ? sum_dyx : sum_dy;
      T* d = (*d_in)[k].template data<T>();
      for (int64_t j = 0; j < c; ++j) d[j] = T(src[j]);
      ctx.InputGradientDone(k);
    }
    LS_RETURN_IF_ERROR(ctx.SumOverReplicas(&sums));
    if (!need[0]) return absl::OkStatus();
    (*d_in)[0] = this->GradientLike(ctx, in, 0);
    T* dx = (*d_in)[0].data<T>();
    std::fill(dx, dx + in[0].num_elements(), T(0));
    Tensor coefficients = ctx.allocate(DTypeOf<T>(), Shape{2, c});
    T *mean_dy = coefficients.data<T>(), *mean_dyx = mean_dy + c;
    SyncGradientMeans(sum_dy, global_rows_, c, mean_dy);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < c; ++j) {
        const T xhat = (x[r * c + j] - mean[j]) * rstd[j];
        dx[r * c + j] =
            rstd[j] * (dy[r * c + j] * gamma[j] - gamma[j] * (mean_dy[j] + xhat * mean_dyx[j]));
      }
    }
    return absl::OkStatus();
  }

  // The row groups of x [batch, ..., c] seen as [rows, c]: one per virtual batch of
  // node.virtual_batch_size examples when training with them (the last may be smaller),
  // else one of every row.
  std::vector<RowGroup> Groups(bool training, const Tensor& x) const {
    const int64_t c = x.shape()[-1], rows = c == 0 ? 0 : x.num_elements() / c;
    const int64_t batch = x.shape().dim(0), v = this->node_.virtual_batch_size();
    if (!training || v <= 0 || batch <= v) return {{0, rows}};
    const int64_t per_example = rows / batch;
    std::vector<RowGroup> groups;
    for (int64_t b = 0; b < batch; b += v) {
      groups.push_back({b * per_example, std::min(b + v, batch) * per_example});
    }
    return groups;
  }

  // Per channel, into stats [3, c]: the mean, the (biased) variance and
  // 1 / sqrt(variance + epsilon); of the group's rows when training, else the moving ones.
  void Statistics(bool training, absl::Span<const Tensor> in, RowGroup g, T* stats) const {
    const int64_t c = in[0].shape()[-1];
    T *mean = stats, *var = stats + c, *rstd = stats + 2 * c;
    if (!training) {
      std::copy(in[3].data<T>(), in[3].data<T>() + c, mean);
      std::copy(in[4].data<T>(), in[4].data<T>() + c, var);
    } else {
      const T* x = in[0].data<T>();
      std::fill(mean, mean + 2 * c, T(0));
      for (int64_t r = g.begin; r < g.end; ++r) {
        for (int64_t j = 0; j < c; ++j) mean[j] += x[r * c + j];
      }
      const T n = T(std::max<int64_t>(g.end - g.begin, 1));
      for (int64_t j = 0; j < c; ++j) mean[j] /= n;
      for (int64_t r = g.begin; r < g.end; ++r) {
        for (int64_t j = 0; j < c; ++j) {
          const T d = x[r * c + j] - mean[j];
          var[j] += d * d;
        }
      }
      for (int64_t j = 0; j < c; ++j) var[j] /= n;
    }
    const T eps = T(this->node_.epsilon());
    for (int64_t j = 0; j < c; ++j) rstd[j] = T(1) / std::sqrt(var[j] + eps);
  }

  // Synchronized training: the global batch's statistics from the last Compute, and its rows.
  std::vector<T> sync_stats_;
  double global_rows_ = 0;
};

// The row groups of x [batch, ..., c] as the device kernels take them: Groups() above in
// arithmetic form (one group of every row unless training with virtual batches).
gpu::BatchNormDims DeviceGroups(const v1::NodeDef& node, bool training, const Tensor& x) {
  gpu::BatchNormDims d;
  d.c = x.shape()[-1];
  d.rows = d.c == 0 ? 0 : x.num_elements() / d.c;
  d.group_rows = d.rows;
  const int64_t batch = x.shape().dim(0), v = node.virtual_batch_size();
  if (training && v > 0 && batch > v) {
    d.group_rows = v * (d.rows / batch);
    d.groups = (batch + v - 1) / v;
  }
  return d;
}

class BatchNormGpuKernel final : public GpuOpKernel {
 public:
  using GpuOpKernel::GpuOpKernel;

 protected:
  absl::Status Compute(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                       absl::Span<const Tensor> in, Tensor* out) override {
    if (Synchronized(ctx)) return ComputeSynchronized(ctx, gpu, in, out);
    const gpu::BatchNormDims d = DeviceGroups(node_, ctx.training, in[0]);
    LS_ASSIGN_OR_RETURN(Tensor stats, Allocate(ctx, DType::kF32, Shape{d.groups, 3, d.c}));
    LS_RETURN_IF_ERROR(gpu.kernels->BatchNorm(
        F32(in[0]), F32(in[1]), F32(in[2]), F32(in[3]), F32(in[4]), d, ctx.training,
        static_cast<float>(node_.epsilon()), F32(stats), F32(*out), gpu.stream()));
    if (!ctx.training || d.rows == 0) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN(Tensor delta_mean, Allocate(ctx, DType::kF32, Shape{d.c}));
    LS_ASSIGN_OR_RETURN(Tensor delta_variance, Allocate(ctx, DType::kF32, Shape{d.c}));
    LS_RETURN_IF_ERROR(gpu.kernels->BatchNormMovingUpdates(
        F32(stats), F32(in[3]), F32(in[4]), d, static_cast<float>(node_.momentum()),
        F32(delta_mean), F32(delta_variance), gpu.stream()));
    ctx.UpdateState(3, std::move(delta_mean));
    ctx.UpdateState(4, std::move(delta_variance));
    return absl::OkStatus();
  }

  absl::Status Gradient(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                        absl::Span<const Tensor> in, const Tensor&, const Tensor& d_out,
                        const std::vector<bool>& need, std::vector<Tensor>* d_in) override {
    if (need[3] || need[4]) {
      return absl::InvalidArgumentError(absl::StrCat(
          node_.name(), ": the moving statistics take no gradient; make them non-trainable"));
    }
    if (Synchronized(ctx)) return GradientSynchronized(ctx, gpu, in, d_out, need, d_in);
    const gpu::BatchNormDims d = DeviceGroups(node_, ctx.training, in[0]);
    LS_ASSIGN_OR_RETURN(Tensor stats, Allocate(ctx, DType::kF32, Shape{d.groups, 3, d.c}));
    LS_ASSIGN_OR_RETURN(Tensor sums, Allocate(ctx, DType::kF32, Shape{d.groups, 2, d.c}));
    // gamma's and beta's gradients, or scratch where they are not wanted.
    Tensor params[2];
    for (int k = 1; k < 3; ++k) {
      if (need[k]) {
        LS_ASSIGN_OR_RETURN(params[k - 1], GradientLike(ctx, in, k));
      } else {
        LS_ASSIGN_OR_RETURN(params[k - 1], Allocate(ctx, DType::kF32, Shape{d.c}));
      }
    }
    float* dx = nullptr;
    if (need[0]) {
      LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
      dx = F32((*d_in)[0]);
    }
    LS_RETURN_IF_ERROR(
        gpu.kernels->BatchNormGrad(F32(in[0]), F32(d_out), F32(in[1]), F32(in[3]), F32(in[4]), d,
                                   ctx.training, static_cast<float>(node_.epsilon()), F32(stats),
                                   F32(sums), F32(params[0]), F32(params[1]), dx, gpu.stream()));
    for (int k = 1; k < 3; ++k) {
      if (!need[k]) continue;
      (*d_in)[k] = params[k - 1];
      ctx.InputGradientDone(k);
    }
    return absl::OkStatus();
  }

 private:
  bool Synchronized(const KernelContext& ctx) const { return ctx.training && node_.synchronized(); }

  // Synchronized training, as the CPU kernel's ComputeSynchronized: two passes of per-channel
  // f64 partial sums on the device (of x, then of the squared deviations from the global
  // mean), each copied to the host, summed over the replicas there and its result copied
  // back; then y and the moving statistics' updates on the device. Host staging costs, per
  // layer and step, two device->host copies of c doubles and two host->device copies (c
  // doubles, 3c floats), each followed by a stream synchronization (four; the uploads' wait
  // only for their copy, the stream being idle), besides the cross-replica sums themselves:
  // few bytes beside the layer's activations, but latency the device waits through. The
  // statistics stay on the device for the gradient.
  absl::Status ComputeSynchronized(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                                   absl::Span<const Tensor> in, Tensor* out) {
    const int64_t c = in[0].shape()[-1], rows = c == 0 ? 0 : in[0].num_elements() / c;
    const int64_t local = ctx.phantom_batch ? 0 : rows;  // a phantom batch adds nothing
    const float* x = F32(in[0]);
    LS_ASSIGN_OR_RETURN(Tensor device_sums, Allocate(ctx, DType::kF64, Shape{c}));
    LS_RETURN_IF_ERROR(gpu.kernels->SyncBatchNormSum(
        x, nullptr, local, c, device_sums.device_data<double>(), gpu.stream()));
    Tensor sums(DType::kF64, Shape{c + 1});  // sum x per channel, then rows
    LS_RETURN_IF_ERROR(ToHost(gpu, device_sums, c, sums.data<double>()));
    double* sum = sums.data<double>();
    sum[c] = static_cast<double>(local);
    LS_RETURN_IF_ERROR(ctx.SumOverReplicas(&sums));
    LS_ASSIGN_OR_RETURN(global_rows_, GlobalRows(node_, sum[c]));

    Tensor mean(DType::kF64, Shape{c});  // the global mean, f64, as the CPU subtracts it
    for (int64_t j = 0; j < c; ++j) mean.data<double>()[j] = sum[j] / global_rows_;
    LS_RETURN_IF_ERROR(ToDevice(gpu, mean, &device_sums));
    LS_ASSIGN_OR_RETURN(Tensor device_squares, Allocate(ctx, DType::kF64, Shape{c}));
    LS_RETURN_IF_ERROR(gpu.kernels->SyncBatchNormSum(x, device_sums.device_data<double>(), local, c,
                                                     device_squares.device_data<double>(),
                                                     gpu.stream()));
    Tensor squares(DType::kF64, Shape{c});
    LS_RETURN_IF_ERROR(ToHost(gpu, device_squares, c, squares.data<double>()));
    LS_RETURN_IF_ERROR(ctx.SumOverReplicas(&squares));

    Tensor stats(DType::kF32, Shape{3, c});  // mean, variance, rstd
    SyncStatistics(sum, squares.data<double>(), global_rows_, node_.epsilon(), c,
                   stats.data<float>());
    LS_ASSIGN_OR_RETURN(sync_stats_, Allocate(ctx, DType::kF32, Shape{1, 3, c}));
    LS_RETURN_IF_ERROR(ToDevice(gpu, stats, &sync_stats_));
    LS_RETURN_IF_ERROR(gpu.kernels->BatchNormApply(x, F32(in[1]), F32(in[2]), F32(sync_stats_),
                                                   rows, c, F32(*out), gpu.stream()));
    // Every replica computes the same update; the gradient all-reduce averages it.
    gpu::BatchNormDims one;
    one.rows = rows, one.c = c, one.group_rows = rows;
    LS_ASSIGN_OR_RETURN(Tensor delta_mean, Allocate(ctx, DType::kF32, Shape{c}));
    LS_ASSIGN_OR_RETURN(Tensor delta_variance, Allocate(ctx, DType::kF32, Shape{c}));
    LS_RETURN_IF_ERROR(gpu.kernels->BatchNormMovingUpdates(
        F32(sync_stats_), F32(in[3]), F32(in[4]), one, static_cast<float>(node_.momentum()),
        F32(delta_mean), F32(delta_variance), gpu.stream()));
    ctx.UpdateState(3, std::move(delta_mean));
    ctx.UpdateState(4, std::move(delta_variance));
    return absl::OkStatus();
  }

  // As BackwardSynchronized on the CPU: this replica's f64 sums of dy and dy * xhat on the
  // device (and from them dgamma, dbeta, this replica's share), copied to the host and summed
  // over the replicas; their global means copied back for dx. A phantom batch's dx is zero.
  // Host staging: one device->host copy of 2c doubles and one host->device copy of 2c floats,
  // each followed by a stream synchronization.
  absl::Status GradientSynchronized(const KernelContext& ctx, const gpu::GpuDevice& gpu,
                                    absl::Span<const Tensor> in, const Tensor& d_out,
                                    const std::vector<bool>& need, std::vector<Tensor>* d_in) {
    const int64_t c = in[0].shape()[-1], rows = c == 0 ? 0 : in[0].num_elements() / c;
    const int64_t local = ctx.phantom_batch ? 0 : rows;
    if (!sync_stats_.valid() || sync_stats_.num_elements() != 3 * c) {
      return absl::InternalError(
          absl::StrCat(node_.name(), ": backward pass without a forward pass"));
    }
    LS_ASSIGN_OR_RETURN(Tensor device_sums, Allocate(ctx, DType::kF64, Shape{2, c}));
    Tensor params[2];  // gamma's and beta's gradients, or scratch where they are not wanted
    for (int k = 1; k < 3; ++k) {
      if (need[k]) {
        LS_ASSIGN_OR_RETURN(params[k - 1], GradientLike(ctx, in, k));
      } else {
        LS_ASSIGN_OR_RETURN(params[k - 1], Allocate(ctx, DType::kF32, Shape{c}));
      }
    }
    LS_RETURN_IF_ERROR(gpu.kernels->SyncBatchNormGradSums(
        F32(in[0]), F32(d_out), F32(sync_stats_), local, c, device_sums.device_data<double>(),
        F32(params[0]), F32(params[1]), gpu.stream()));
    for (int k = 1; k < 3; ++k) {
      if (!need[k]) continue;
      (*d_in)[k] = params[k - 1];
      ctx.InputGradientDone(k);
    }
    Tensor sums(DType::kF64, Shape{2, c});  // sum dy, sum dy * xhat
    LS_RETURN_IF_ERROR(ToHost(gpu, device_sums, 2 * c, sums.data<double>()));
    LS_RETURN_IF_ERROR(ctx.SumOverReplicas(&sums));
    if (!need[0]) return absl::OkStatus();
    LS_ASSIGN_OR_RETURN((*d_in)[0], GradientLike(ctx, in, 0));
    float* dx = F32((*d_in)[0]);
    if (local == 0) return gpu.context->Zero(dx, in[0].num_elements() * sizeof(float));
    Tensor means(DType::kF32, Shape{2, c});  // mean dy, mean dy * xhat
    SyncGradientMeans(sums.data<double>(), global_rows_, c, means.data<float>());
    LS_ASSIGN_OR_RETURN(Tensor device_means, Allocate(ctx, DType::kF32, Shape{2, c}));
    LS_RETURN_IF_ERROR(ToDevice(gpu, means, &device_means));
    return gpu.kernels->SyncBatchNormInput(F32(in[0]), F32(d_out), F32(in[1]), F32(sync_stats_),
                                           F32(device_means), rows, c, dx, gpu.stream());
  }

  // The explicit copies of synchronized training's per-channel vectors. Both wait for the
  // stream: the host reads what the device summed, and the host buffer of an upload is free
  // once it returns.
  static absl::Status ToHost(const gpu::GpuDevice& gpu, const Tensor& device, int64_t n,
                             double* host) {
    if (n == 0) return absl::OkStatus();
    LS_RETURN_IF_ERROR(gpu.context->CopyToHost(host, device.device_data<double>(),
                                               static_cast<size_t>(n) * sizeof(double)));
    return gpu.context->Synchronize();
  }
  static absl::Status ToDevice(const gpu::GpuDevice& gpu, const Tensor& host, Tensor* device) {
    if (host.num_elements() == 0) return absl::OkStatus();
    LS_RETURN_IF_ERROR(
        gpu.context->CopyToDevice(device->raw_device_data(), host.raw_data(), host.num_bytes()));
    return gpu.context->Synchronize();
  }

  // Synchronized training: the global batch's statistics [1, 3, c] on the device from the last
  // Compute (for Gradient, which this replica's thread calls next), and its rows.
  Tensor sync_stats_;
  double global_rows_ = 0;
};

}  // namespace

void RegisterBatchNorm(OpRegistry* r) {
  MustRegister(
      r, WithCuda<BatchNormGpuKernel>(CpuOp<BatchNormKernel>(v1::BATCH_NORM, 5, BatchNormShape)));
}

}  // namespace lockstep::engine
