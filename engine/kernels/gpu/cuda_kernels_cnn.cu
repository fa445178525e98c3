// CudaKernels' convolutional-model kernels: the bodies of kernel_bodies_cnn.h launched through
// cuda_launch.cu.h's __global__ templates, with the same launch checks as the emulator.
#include <cuda_runtime_api.h>

#include "common/cuda/cuda_status.h"
#include "common/status.h"
#include "engine/kernels/gpu/cuda_kernels.h"
#include "engine/kernels/gpu/cuda_launch.cu.h"
#include "engine/kernels/gpu/kernel_bodies_cnn.h"

namespace lockstep::engine::gpu {
namespace {

using D = DeviceAccess;

// One element-wise launch of body K over n threads' work on stream s.
template <class K>
absl::Status Launch(const char* what, int64_t n, CudaStream s, const K& kernel) {
  const LaunchShape shape = ElementwiseShape(n);
  RunKernel<<<shape.blocks, shape.threads, 0, reinterpret_cast<cudaStream_t>(s)>>>(kernel);
  return CudaStatus(cudaGetLastError(), what);
}

}  // namespace

absl::Status CudaKernels::Im2Col(const float* x, const WindowGeometry& w, float* cols,
                                 CudaStream s) {
  LS_RETURN_IF_ERROR(CheckWindow("Im2Col", w));
  const int64_t n = w.rows() * w.cols();
  LS_RETURN_IF_ERROR(CheckLaunch("Im2Col", w.input_size(), {x}));
  LS_RETURN_IF_ERROR(CheckLaunch("Im2Col", n, {cols}));
  if (n == 0) return absl::OkStatus();
  return Launch("Im2Col launch", n, s, Im2ColKernel<D>{{x}, {cols}, w});
}

absl::Status CudaKernels::Col2Im(const float* cols, const WindowGeometry& w, float* dx,
                                 CudaStream s) {
  LS_RETURN_IF_ERROR(CheckWindow("Col2Im", w));
  const int64_t n = w.input_size();
  LS_RETURN_IF_ERROR(CheckLaunch("Col2Im", w.rows() * w.cols(), {cols}));
  LS_RETURN_IF_ERROR(CheckLaunch("Col2Im", n, {dx}));
  if (n == 0) return absl::OkStatus();
  return Launch("Col2Im launch", n, s, Col2ImKernel<D>{{cols}, {dx}, w});
}

absl::Status CudaKernels::MaxPool(const float* x, const WindowGeometry& w, float* y, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckWindow("MaxPool", w));
  const int64_t n = w.pooled_size();
  LS_RETURN_IF_ERROR(CheckLaunch("MaxPool", w.input_size(), {x}));
  LS_RETURN_IF_ERROR(CheckLaunch("MaxPool", n, {y}));
  if (n == 0) return absl::OkStatus();
  return Launch("MaxPool launch", n, s, MaxPoolKernel<D>{{x}, {y}, w});
}

absl::Status CudaKernels::MaxPoolGrad(const float* x, const WindowGeometry& w, const float* dy,
                                      float* dx, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckWindow("MaxPoolGrad", w));
  const int64_t n = w.input_size();
  LS_RETURN_IF_ERROR(CheckLaunch("MaxPoolGrad", n, {x, dx}));
  LS_RETURN_IF_ERROR(CheckLaunch("MaxPoolGrad", w.pooled_size(), {dy}));
  if (n == 0) return absl::OkStatus();
  return Launch("MaxPoolGrad launch", n, s, MaxPoolGradKernel<D>{{x}, {dy}, {dx}, w});
}

absl::Status CudaKernels::BatchNorm(const float* x, const float* gamma, const float* beta,
                                    const float* moving_mean, const float* moving_variance,
                                    const BatchNormDims& d, bool training, float epsilon,
                                    float* stats, float* y, CudaStream s) {
  const char* k = "BatchNorm";
  LS_RETURN_IF_ERROR(CheckBatchNorm(k, d));
  const int64_t n = d.rows * d.c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, y}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, d.c, {gamma, beta, moving_mean, moving_variance}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, d.groups * 3 * d.c, {stats}));
  if (d.c == 0) return absl::OkStatus();
  LS_RETURN_IF_ERROR(
      Launch("BatchNormStats launch", d.groups * d.c, s,
             BatchNormStatsKernel<D>{
                 {x}, {moving_mean}, {moving_variance}, {stats}, d, training, epsilon}));
  if (n == 0) return absl::OkStatus();
  return Launch("BatchNormApply launch", n, s,
                BatchNormApplyKernel<D>{{x}, {gamma}, {beta}, {stats}, {y}, d});
}

absl::Status CudaKernels::BatchNormMovingUpdates(const float* stats, const float* moving_mean,
                                                 const float* moving_variance,
                                                 const BatchNormDims& d, float momentum,
                                                 float* delta_mean, float* delta_variance,
                                                 CudaStream s) {
  const char* k = "BatchNormMovingUpdates";
  LS_RETURN_IF_ERROR(CheckBatchNorm(k, d));
  LS_RETURN_IF_ERROR(CheckLaunch(k, d.groups * 3 * d.c, {stats}));
  LS_RETURN_IF_ERROR(
      CheckLaunch(k, d.c, {moving_mean, moving_variance, delta_mean, delta_variance}));
  if (d.c == 0) return absl::OkStatus();
  return Launch(
      "BatchNormMoving launch", d.c, s,
      BatchNormMovingKernel<D>{
          {stats}, {moving_mean}, {moving_variance}, {delta_mean}, {delta_variance}, d, momentum});
}

absl::Status CudaKernels::BatchNormGrad(const float* x, const float* dy, const float* gamma,
                                        const float* moving_mean, const float* moving_variance,
                                        const BatchNormDims& d, bool training, float epsilon,
                                        float* stats, float* sums, float* d_gamma, float* d_beta,
                                        float* dx, CudaStream s) {
  const char* k = "BatchNormGrad";
  LS_RETURN_IF_ERROR(CheckBatchNorm(k, d));
  const int64_t n = d.rows * d.c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, dy}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, d.c, {gamma, moving_mean, moving_variance, d_gamma, d_beta}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, d.groups * 2 * d.c, {stats, sums}));
  if (d.c == 0) return absl::OkStatus();
  LS_RETURN_IF_ERROR(
      Launch("BatchNormStats launch", d.groups * d.c, s,
             BatchNormStatsKernel<D>{
                 {x}, {moving_mean}, {moving_variance}, {stats}, d, training, epsilon}));
  LS_RETURN_IF_ERROR(Launch("BatchNormSums launch", d.groups * d.c, s,
                            BatchNormSumsKernel<D>{{x}, {dy}, {stats}, {sums}, d}));
  LS_RETURN_IF_ERROR(Launch("BatchNormParams launch", d.c, s,
                            BatchNormParamsKernel<D>{{sums}, {d_gamma}, {d_beta}, d}));
  if (dx == nullptr || n == 0) return absl::OkStatus();
  return Launch("BatchNormInput launch", n, s,
                BatchNormInputKernel<D>{{x}, {dy}, {gamma}, {stats}, {sums}, {dx}, d, training});
}

absl::Status CudaKernels::SyncBatchNormSum(const float* x, const double* mean, int64_t rows,
                                           int64_t c, double* sums, CudaStream s) {
  const char* k = "SyncBatchNormSum";
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows * c, {x}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, c, {sums}));
  if (c == 0) return absl::OkStatus();
  return Launch("SyncBatchNormSum launch", c, s,
                SyncBatchNormSumKernel<D>{{x}, {mean}, {sums}, rows, c, mean != nullptr});
}

absl::Status CudaKernels::BatchNormApply(const float* x, const float* gamma, const float* beta,
                                         const float* stats, int64_t rows, int64_t c, float* y,
                                         CudaStream s) {
  const char* k = "BatchNormApply";
  const int64_t n = rows * c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, y}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, c, {gamma, beta, stats}));
  if (n == 0) return absl::OkStatus();
  BatchNormDims d;
  d.rows = rows, d.c = c, d.group_rows = rows;
  return Launch("BatchNormApply launch", n, s,
                BatchNormApplyKernel<D>{{x}, {gamma}, {beta}, {stats}, {y}, d});
}

absl::Status CudaKernels::SyncBatchNormGradSums(const float* x, const float* dy, const float* stats,
                                                int64_t rows, int64_t c, double* sums,
                                                float* d_gamma, float* d_beta, CudaStream s) {
  const char* k = "SyncBatchNormGradSums";
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows * c, {x, dy}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, c, {stats, sums, d_gamma, d_beta}));
  if (c == 0) return absl::OkStatus();
  return Launch(
      "SyncBatchNormGradSums launch", c, s,
      SyncBatchNormGradSumsKernel<D>{{x}, {dy}, {stats}, {sums}, {d_gamma}, {d_beta}, rows, c});
}

absl::Status CudaKernels::SyncBatchNormInput(const float* x, const float* dy, const float* gamma,
                                             const float* stats, const float* means, int64_t rows,
                                             int64_t c, float* dx, CudaStream s) {
  const char* k = "SyncBatchNormInput";
  const int64_t n = rows * c;
  LS_RETURN_IF_ERROR(CheckLaunch(k, n, {x, dy, dx}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, c, {gamma, stats, means}));
  if (n == 0) return absl::OkStatus();
  return Launch("SyncBatchNormInput launch", n, s,
                SyncBatchNormInputKernel<D>{{x}, {dy}, {gamma}, {stats}, {means}, {dx}, rows, c});
}

}  // namespace lockstep::engine::gpu
