#include "common/cuda/cuda_status.h"
#include "engine/kernels/cuda/elementwise.h"

namespace lockstep::engine::cuda {
namespace {

constexpr int kThreads = 256;
// Grid-stride loops: a bounded grid covers any n.
constexpr int64_t kMaxBlocks = 4096;

__global__ void AxpyKernel(float a, const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = fmaf(a, x[i], y[i]);
  }
}

__global__ void ScaleKernel(const float* __restrict__ x, float s, float* __restrict__ y,
                            int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = x[i] * s;
  }
}

int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

absl::Status CheckBuffers(const void* x, const void* y, int64_t n, const char* what) {
  if (n < 0) return absl::InvalidArgumentError(std::string(what) + ": negative element count");
  if (n > 0 && (x == nullptr || y == nullptr)) {
    return absl::InvalidArgumentError(std::string(what) + ": null buffer with elements");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Axpy(float a, const float* x, float* y, int64_t n, cudaStream_t stream) {
  if (absl::Status s = CheckBuffers(x, y, n, "Axpy"); !s.ok() || n == 0) return s;
  AxpyKernel<<<Blocks(n), kThreads, 0, stream>>>(a, x, y, n);
  return CudaStatus(cudaGetLastError(), "Axpy launch");
}

absl::Status Scale(const float* x, float s, float* y, int64_t n, cudaStream_t stream) {
  if (absl::Status st = CheckBuffers(x, y, n, "Scale"); !st.ok() || n == 0) return st;
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(x, s, y, n);
  return CudaStatus(cudaGetLastError(), "Scale launch");
}

}  // namespace lockstep::engine::cuda
