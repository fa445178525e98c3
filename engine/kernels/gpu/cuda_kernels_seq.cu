// CudaKernels' sequence-model launches (GpuKernels' "Sequence models" block): the bodies of
// kernel_bodies_seq.h as __global__ kernels (cuda_launch.cu.h) on the stream, with the same
// launch-time checks as the emulator (emulated_kernels_seq.cc).
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "common/cuda/cuda_status.h"
#include "common/status.h"
#include "engine/kernels/gpu/cuda_kernels.h"
#include "engine/kernels/gpu/cuda_launch.cu.h"
#include "engine/kernels/gpu/kernel_bodies_seq.h"

namespace lockstep::engine::gpu {
namespace {

using D = DeviceAccess;

template <class K>
absl::Status Run(const char* what, int64_t threads_of_work, CudaStream s, const K& kernel) {
  const LaunchShape shape = ElementwiseShape(threads_of_work);
  RunKernel<<<shape.blocks, shape.threads, 0, reinterpret_cast<cudaStream_t>(s)>>>(kernel);
  return CudaStatus(cudaGetLastError(), what);
}

// K<D, L> with L the ids' element type, launched over `work` threads: K{ids, rest...}.
template <template <class, typename> class K, typename... Rest>
absl::Status RunIndexed(const char* what, int64_t work, CudaStream s, IndexType type,
                        const void* ids, Rest... rest) {
  switch (type) {
    case IndexType::kI32:
      return Run(what, work, s, K<D, int32_t>{{static_cast<const int32_t*>(ids)}, rest...});
    case IndexType::kI64:
      return Run(what, work, s, K<D, int64_t>{{static_cast<const int64_t*>(ids)}, rest...});
    case IndexType::kF32:
      break;
  }
  return Run(what, work, s, K<D, float>{{static_cast<const float*>(ids)}, rest...});
}

absl::Status CheckPlanRank(const char* kernel, int rank) {
  if (rank < 0 || rank > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": rank ", rank, " is outside [0, ", kMaxRank, "]"));
  }
  return absl::OkStatus();
}

// The input and output element counts of a reduction plan.
void PlanCounts(const ReducePlan& plan, int64_t* n, int64_t* outputs) {
  *n = 1;
  *outputs = 1;
  for (int d = 0; d < plan.rank; ++d) {
    *n *= plan.dims[d];
    if (!plan.reduced[d]) *outputs *= plan.dims[d];
  }
}

}  // namespace

absl::Status CudaKernels::Activation(ActivationOp op, const float* x, float* y, int64_t n,
                                     CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Activation", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  return Run("Activation launch", n, s, ActivationKernel<D>{op, {x}, {y}, n});
}

absl::Status CudaKernels::ActivationGrad(ActivationOp op, const float* x, const float* y,
                                         const float* dy, float* dx, int64_t n, CudaStream s) {
  const float* read = op == ActivationOp::kGelu ? x : y;
  LS_RETURN_IF_ERROR(CheckLaunch("ActivationGrad", n, {read, dy, dx}));
  if (n == 0) return absl::OkStatus();
  return Run("ActivationGrad launch", n, s, ActivationGradKernel<D>{op, {x}, {y}, {dy}, {dx}, n});
}

absl::Status CudaKernels::Binary(BinaryOp op, const float* a, const float* b, float* y, int64_t n,
                                 CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Binary", n, {a, b, y}));
  if (n == 0) return absl::OkStatus();
  return Run("Binary launch", n, s, BinaryKernel<D>{op, {a}, {b}, {y}, n});
}

absl::Status CudaKernels::SoftmaxGrad(const float* y, const float* dy, float* dx, int64_t rows,
                                      int64_t cols, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("SoftmaxGrad", rows, cols, {y, dy, dx}));
  if (rows * cols == 0) return absl::OkStatus();
  return Run("SoftmaxGrad launch", rows, s, SoftmaxGradRowsKernel<D>{{y}, {dy}, {dx}, rows, cols});
}

absl::Status CudaKernels::LayerNorm(const float* x, const float* gamma, const float* beta, float* y,
                                    int64_t rows, int64_t cols, float eps, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("LayerNorm", rows, cols, {x, gamma, beta, y}));
  if (rows * cols == 0) return absl::OkStatus();
  return Run("LayerNorm launch", rows, s,
             LayerNormRowsKernel<D>{{x}, {gamma}, {beta}, {y}, rows, cols, eps});
}

absl::Status CudaKernels::LayerNormGrad(const float* x, const float* gamma, const float* dy,
                                        float* stats, float* dx, float* dgamma, float* dbeta,
                                        int64_t rows, int64_t cols, float eps, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("LayerNormGrad", rows, cols, {x, gamma, dy}));
  LS_RETURN_IF_ERROR(CheckLaunch("LayerNormGrad", 2 * rows, {stats}));
  if (rows * cols == 0) return absl::OkStatus();
  LS_RETURN_IF_ERROR(Run("LayerNormRowGrad launch", rows, s,
                         LayerNormRowGradKernel<D>{
                             {x}, {gamma}, {dy}, {stats}, {dx}, rows, cols, eps, dx != nullptr}));
  if (dgamma == nullptr && dbeta == nullptr) return absl::OkStatus();
  return Run(
      "LayerNormParamGrad launch", cols, s,
      LayerNormParamGradKernel<D>{
          {x}, {dy}, {stats}, {dgamma}, {dbeta}, rows, cols, dgamma != nullptr, dbeta != nullptr});
}

absl::Status CudaKernels::Reduce(const ReducePlan& plan, bool mean, const float* x, float* y,
                                 CudaStream s) {
  LS_RETURN_IF_ERROR(CheckPlanRank("Reduce", plan.rank));
  int64_t n, outputs;
  PlanCounts(plan, &n, &outputs);
  LS_RETURN_IF_ERROR(CheckLaunch("Reduce", n, {x}));
  LS_RETURN_IF_ERROR(CheckLaunch("Reduce", outputs, {y}));
  if (outputs == 0) return absl::OkStatus();
  return Run("Reduce launch", outputs, s,
             ReduceKernel<D>{plan, {x}, {y}, outputs, n / outputs, mean});
}

absl::Status CudaKernels::ReduceGrad(const ReducePlan& plan, const float* dy, float* dx,
                                     CudaStream s) {
  LS_RETURN_IF_ERROR(CheckPlanRank("ReduceGrad", plan.rank));
  int64_t n, outputs;
  PlanCounts(plan, &n, &outputs);
  LS_RETURN_IF_ERROR(CheckLaunch("ReduceGrad", n, {dy, dx}));
  if (n == 0) return absl::OkStatus();
  return Run("ReduceGrad launch", n, s, ReduceGradKernel<D>{plan, {dy}, {dx}, n});
}

absl::Status CudaKernels::Concat(const ConcatPlan& plan, float* y, CudaStream s) {
  if (plan.inputs < 1 || plan.inputs > kMaxConcatInputs || plan.outer < 0) {
    return absl::InvalidArgumentError(absl::StrCat("Concat: ", plan.inputs, " inputs of ",
                                                   plan.outer, " rows (1 to ", kMaxConcatInputs,
                                                   " inputs)"));
  }
  ConcatKernel<D> kernel{};
  int64_t row = 0;
  for (int i = 0; i < plan.inputs; ++i) {
    LS_RETURN_IF_ERROR(CheckLaunch("Concat", plan.outer * plan.width[i], {plan.data[i]}));
    kernel.in[i] = {plan.data[i]};
    kernel.width[i] = plan.width[i];
    row += plan.width[i];
  }
  const int64_t n = plan.outer * row;
  LS_RETURN_IF_ERROR(CheckLaunch("Concat", n, {y}));
  if (n == 0) return absl::OkStatus();
  kernel.inputs = plan.inputs;
  kernel.row = row;
  kernel.y = {y};
  kernel.n = n;
  return Run("Concat launch", n, s, kernel);
}

absl::Status CudaKernels::SliceColumns(const float* src, int64_t row, int64_t offset, float* dst,
                                       int64_t outer, int64_t width, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("SliceColumns", outer, width, {src, dst}));
  if (offset < 0 || offset + width > row) {
    return absl::InvalidArgumentError(absl::StrCat("SliceColumns: columns [", offset, ", ",
                                                   offset + width, ") of rows of ", row));
  }
  const int64_t n = outer * width;
  if (n == 0) return absl::OkStatus();
  return Run("SliceColumns launch", n, s,
             SliceColumnsKernel<D>{{src}, {dst}, row, offset, width, n});
}

absl::Status CudaKernels::ArgmaxRows(const float* x, int64_t* idx, int64_t rows, int64_t cols,
                                     CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("ArgmaxRows", rows, cols, {x}));
  LS_RETURN_IF_ERROR(CheckLaunch("ArgmaxRows", rows, {idx}));
  if (rows * cols == 0) return absl::OkStatus();
  return Run("ArgmaxRows launch", rows, s, ArgmaxRowsKernel<D>{{x}, {idx}, rows, cols});
}

absl::Status CudaKernels::Gather(const void* ids, IndexType type, const float* table, float* y,
                                 int64_t count, int64_t vocab, int64_t dim, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("Gather", vocab, dim, {table}));
  LS_RETURN_IF_ERROR(CheckRows("Gather", count, dim, {y}));
  LS_RETURN_IF_ERROR(CheckLaunch("Gather", count, {ids}));
  const int64_t n = count * dim;
  if (n == 0) return absl::OkStatus();
  return RunIndexed<GatherKernel>("Gather launch", n, s, type, ids, D::In<float>{table},
                                  D::Out<float>{y}, n, dim);
}

absl::Status CudaKernels::EmbeddingGrad(const void* ids, IndexType type, const float* dy,
                                        float* dtable, int64_t count, int64_t vocab, int64_t dim,
                                        CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("EmbeddingGrad", vocab, dim, {dtable}));
  LS_RETURN_IF_ERROR(CheckRows("EmbeddingGrad", count, dim, {dy}));
  LS_RETURN_IF_ERROR(CheckLaunch("EmbeddingGrad", count, {ids}));
  const int64_t n = vocab * dim;
  if (n == 0) return absl::OkStatus();
  return RunIndexed<EmbeddingGradKernel>("EmbeddingGrad launch", n, s, type, ids, D::In<float>{dy},
                                         D::Out<float>{dtable}, count, n, dim);
}

absl::Status CudaKernels::Dropout(uint64_t key, double rate, float scale, const float* x, float* y,
                                  int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Dropout", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  return Run("Dropout launch", (n + 3) / 4, s, DropoutKernel<D>{key, rate, scale, {x}, {y}, n});
}

absl::Status CudaKernels::RowsToHeads(const HeadsLayout& layout, const float* src, float* dst,
                                      CudaStream s) {
  const int64_t n = layout.elements();
  LS_RETURN_IF_ERROR(CheckLaunch("RowsToHeads", n, {src, dst}));
  if (n == 0) return absl::OkStatus();
  return Run("RowsToHeads launch", n, s, RowsToHeadsKernel<D>{layout, {src}, {dst}, n});
}

absl::Status CudaKernels::HeadsToRows(const HeadsLayout& layout, const float* src, float* dst,
                                      CudaStream s) {
  const int64_t n = layout.elements();
  LS_RETURN_IF_ERROR(CheckLaunch("HeadsToRows", n, {src, dst}));
  if (n == 0) return absl::OkStatus();
  return Run("HeadsToRows launch", n, s, HeadsToRowsKernel<D>{layout, {src}, {dst}, n});
}

absl::Status CudaKernels::AttentionSoftmax(const float* scores, float* probs, int64_t rows,
                                           int64_t time, bool causal, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("AttentionSoftmax", rows, time, {scores, probs}));
  if (rows * time == 0) return absl::OkStatus();
  return Run("AttentionSoftmax launch", rows, s,
             AttentionSoftmaxKernel<D>{{scores}, {probs}, rows, time, causal});
}

absl::Status CudaKernels::AttentionSoftmaxGrad(const float* probs, const float* dprobs,
                                               float* dscores, int64_t rows, int64_t time,
                                               float scale, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("AttentionSoftmaxGrad", rows, time, {probs, dprobs, dscores}));
  if (rows * time == 0) return absl::OkStatus();
  return Run("AttentionSoftmaxGrad launch", rows, s,
             AttentionSoftmaxGradKernel<D>{{probs}, {dprobs}, {dscores}, rows, time, scale});
}

}  // namespace lockstep::engine::gpu
