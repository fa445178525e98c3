#include <cuda_runtime_api.h>

#include "common/cuda/cuda_status.h"
#include "common/status.h"
#include "engine/kernels/gpu/cuda_kernels.h"
#include "engine/kernels/gpu/cuda_launch.cu.h"
#include "engine/kernels/gpu/kernel_bodies.h"

namespace lockstep::engine::gpu {
namespace {

using D = DeviceAccess;

cudaStream_t Native(CudaStream s) { return reinterpret_cast<cudaStream_t>(s); }

template <class K>
absl::Status Launch(const char* what, LaunchShape shape, CudaStream s, const K& kernel) {
  RunKernel<<<shape.blocks, shape.threads, 0, Native(s)>>>(kernel);
  return CudaStatus(cudaGetLastError(), what);
}

template <class K>
absl::Status LaunchBlocks(const char* what, LaunchShape shape, CudaStream s, const K& kernel) {
  RunBlockKernel<<<shape.blocks, shape.threads, 0, Native(s)>>>(kernel);
  return CudaStatus(cudaGetLastError(), what);
}

}  // namespace

absl::Status CudaKernels::Axpy(float a, const float* x, float* y, int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Axpy", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  return Launch("Axpy launch", ElementwiseShape(n), s, AxpyKernel<D>{a, {x}, {y}, n});
}

absl::Status CudaKernels::CastToBFloat16(const float* x, uint16_t* y, int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("CastToBFloat16", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  return Launch("CastToBFloat16 launch", ElementwiseShape(n), s,
                CastToBFloat16Kernel<D>{{x}, {y}, n});
}

absl::Status CudaKernels::CastFromBFloat16(const uint16_t* x, float* y, int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("CastFromBFloat16", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  return Launch("CastFromBFloat16 launch", ElementwiseShape(n), s,
                CastFromBFloat16Kernel<D>{{x}, {y}, n});
}

absl::Status CudaKernels::Scale(const float* x, float scale, float* y, int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Scale", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  return Launch("Scale launch", ElementwiseShape(n), s, ScaleKernel<D>{{x}, scale, {y}, n});
}

absl::Status CudaKernels::Add(const float* a, const float* b, float* y, int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Add", n, {a, b, y}));
  if (n == 0) return absl::OkStatus();
  return Launch("Add launch", ElementwiseShape(n), s, AddKernel<D>{{a}, {b}, {y}, n});
}

absl::Status CudaKernels::Relu(const float* x, float* y, int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Relu", n, {x, y}));
  if (n == 0) return absl::OkStatus();
  return Launch("Relu launch", ElementwiseShape(n), s, ReluKernel<D>{{x}, {y}, n});
}

absl::Status CudaKernels::ReluGrad(const float* x, const float* dy, float* dx, int64_t n,
                                   CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("ReluGrad", n, {x, dy, dx}));
  if (n == 0) return absl::OkStatus();
  return Launch("ReluGrad launch", ElementwiseShape(n), s, ReluGradKernel<D>{{x}, {dy}, {dx}, n});
}

absl::Status CudaKernels::SoftmaxRows(const float* x, float* y, int64_t rows, int64_t cols,
                                      CudaStream s) {
  if (rows < 0 || cols < 0) return CheckLaunch("SoftmaxRows", -1, {});
  LS_RETURN_IF_ERROR(CheckLaunch("SoftmaxRows", rows * cols, {x, y}));
  if (rows * cols == 0) return absl::OkStatus();
  return LaunchBlocks("SoftmaxRows launch", RowShape(rows), s,
                      SoftmaxRowsKernel<D>{{x}, {y}, rows, cols});
}

absl::Status CudaKernels::RowSum(const float* x, float* y, int64_t rows, int64_t cols,
                                 CudaStream s) {
  if (rows < 0 || cols < 0) return CheckLaunch("RowSum", -1, {});
  LS_RETURN_IF_ERROR(CheckLaunch("RowSum", rows, {y}));
  LS_RETURN_IF_ERROR(CheckLaunch("RowSum", rows * cols, {x}));
  if (rows == 0) return absl::OkStatus();
  return LaunchBlocks("RowSum launch", RowShape(rows), s, RowSumKernel<D>{{x}, {y}, rows, cols});
}

absl::Status CudaKernels::Momentum(const MomentumParams& p, const float* g, float* v, float* w,
                                   int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Momentum", n, {g, v, w}));
  if (n == 0) return absl::OkStatus();
  return Launch("Momentum launch", ElementwiseShape(n), s, MomentumKernel<D>{p, {g}, {v}, {w}, n});
}

absl::Status CudaKernels::Adam(const AdamParams& p, const float* g, float* m, float* v, float* w,
                               int64_t n, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("Adam", n, {g, m, v, w}));
  if (n == 0) return absl::OkStatus();
  return Launch("Adam launch", ElementwiseShape(n), s, AdamKernel<D>{p, {g}, {m}, {v}, {w}, n});
}

absl::Status CudaKernels::SumSquares(const float* x, int64_t n, double* partials, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("SumSquares", n, {x}));
  LS_RETURN_IF_ERROR(CheckLaunch("SumSquares", kNormPartials, {partials}));
  return LaunchBlocks("SumSquares launch", LaunchShape{kNormPartials, kThreadsPerBlock}, s,
                      SumSquaresKernel<D>{{x}, {partials}, n});
}

absl::Status CudaKernels::ClipScale(const double* partials, int64_t count, double clipnorm,
                                    double* norm, float* scale, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("ClipScale", count, {partials}));
  LS_RETURN_IF_ERROR(CheckLaunch("ClipScale", 1, {norm, scale}));
  return LaunchBlocks("ClipScale launch", LaunchShape{1, kThreadsPerBlock}, s,
                      ClipScaleKernel<D>{{partials}, count, clipnorm, {norm}, {scale}});
}

absl::Status CudaKernels::ScaleByDevice(const float* x, const float* scale, float* y, int64_t n,
                                        CudaStream s) {
  LS_RETURN_IF_ERROR(CheckLaunch("ScaleByDevice", n, {x, scale, y}));
  if (n == 0) return absl::OkStatus();
  return Launch("ScaleByDevice launch", ElementwiseShape(n), s,
                ScaleByDeviceKernel<D>{{x}, {scale}, {y}, n});
}

absl::Status CudaKernels::BiasAdd(const float* x, const float* b, float* y, int64_t rows,
                                  int64_t cols, CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("BiasAdd", rows, cols, {x, b, y}));
  const int64_t n = rows * cols;
  if (n == 0) return absl::OkStatus();
  return Launch("BiasAdd launch", ElementwiseShape(n), s, BiasAddKernel<D>{{x}, {b}, {y}, n, cols});
}

absl::Status CudaKernels::ColumnSum(const float* x, float* y, int64_t rows, int64_t cols,
                                    CudaStream s) {
  LS_RETURN_IF_ERROR(CheckRows("ColumnSum", rows, cols, {x}));
  LS_RETURN_IF_ERROR(CheckLaunch("ColumnSum", cols, {y}));
  if (cols == 0) return absl::OkStatus();
  return Launch("ColumnSum launch", ElementwiseShape(cols), s,
                ColumnSumKernel<D>{{x}, {y}, rows, cols});
}

absl::Status CudaKernels::CheckLabels(const void* labels, bool labels_i64, int64_t* bad,
                                      int64_t rows, int64_t classes, CudaStream s) {
  const char* k = "CheckLabels";
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows, {labels}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, 1, {bad}));
  return labels_i64 ? Launch("LabelCheck launch", LaunchShape{1, kWarpSize}, s,
                             LabelCheckKernel<D, int64_t>{
                                 {static_cast<const int64_t*>(labels)}, {bad}, rows, classes})
                    : Launch("LabelCheck launch", LaunchShape{1, kWarpSize}, s,
                             LabelCheckKernel<D, int32_t>{
                                 {static_cast<const int32_t*>(labels)}, {bad}, rows, classes});
}

absl::Status CudaKernels::SoftmaxCrossEntropy(const float* logits, const void* labels,
                                              bool labels_i64, double* terms, float* loss,
                                              int64_t rows, int64_t classes, double eps,
                                              CudaStream s) {
  const char* k = "SoftmaxCrossEntropy";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, classes, {logits}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows, {labels, terms}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, 1, {loss}));
  if (rows > 0) {
    absl::Status st =
        labels_i64
            ? Launch(
                  "XentRows launch", ElementwiseShape(rows), s,
                  XentRowsKernel<D, int64_t>{
                      {logits}, {static_cast<const int64_t*>(labels)}, {terms}, rows, classes, eps})
            : Launch("XentRows launch", ElementwiseShape(rows), s,
                     XentRowsKernel<D, int32_t>{{logits},
                                                {static_cast<const int32_t*>(labels)},
                                                {terms},
                                                rows,
                                                classes,
                                                eps});
    LS_RETURN_IF_ERROR(st);
  }
  return Launch("XentTotal launch", LaunchShape{1, kWarpSize}, s,
                XentTotalKernel<D>{{terms}, {loss}, rows});
}

absl::Status CudaKernels::SoftmaxCrossEntropyGrad(const float* logits, const void* labels,
                                                  bool labels_i64, const float* d_loss, float* grad,
                                                  int64_t rows, int64_t classes, float eps,
                                                  CudaStream s) {
  const char* k = "SoftmaxCrossEntropyGrad";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, classes, {logits, grad}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows, {labels, d_loss}));
  if (rows * classes == 0) return absl::OkStatus();
  if (labels_i64) {
    return Launch(
        "XentGrad launch", ElementwiseShape(rows), s,
        XentGradKernel<D, int64_t>{
            {logits}, {static_cast<const int64_t*>(labels)}, {d_loss}, {grad}, rows, classes, eps});
  }
  return Launch(
      "XentGrad launch", ElementwiseShape(rows), s,
      XentGradKernel<D, int32_t>{
          {logits}, {static_cast<const int32_t*>(labels)}, {d_loss}, {grad}, rows, classes, eps});
}

absl::Status CudaKernels::Accuracy(const float* logits, const void* labels, bool labels_i64,
                                   int32_t* hits, float* rate, int64_t rows, int64_t classes,
                                   CudaStream s) {
  const char* k = "Accuracy";
  LS_RETURN_IF_ERROR(CheckRows(k, rows, classes, {logits}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, rows, {labels, hits}));
  LS_RETURN_IF_ERROR(CheckLaunch(k, 1, {rate}));
  if (rows > 0) {
    absl::Status st =
        labels_i64
            ? Launch("ArgmaxHits launch", ElementwiseShape(rows), s,
                     ArgmaxHitsKernel<D, int64_t>{
                         {logits}, {static_cast<const int64_t*>(labels)}, {hits}, rows, classes})
            : Launch("ArgmaxHits launch", ElementwiseShape(rows), s,
                     ArgmaxHitsKernel<D, int32_t>{
                         {logits}, {static_cast<const int32_t*>(labels)}, {hits}, rows, classes});
    LS_RETURN_IF_ERROR(st);
  }
  return Launch("HitRate launch", LaunchShape{1, kWarpSize}, s,
                HitRateKernel<D>{{hits}, {rate}, rows});
}

}  // namespace lockstep::engine::gpu
