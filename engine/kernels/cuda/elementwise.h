// Element-wise kernels of the GPU device on float32 device buffers: y = a * x + y (Axpy, the
// SGD step and gradient accumulation) and y = x * s (Scale, gradient averaging after an
// all-reduce). Each enqueues one kernel on `stream` and returns without waiting; the caller
// synchronises the stream. Built only under --config=cuda. Stateless; thread-safe.
#ifndef LOCKSTEP_ENGINE_KERNELS_CUDA_ELEMENTWISE_H_
#define LOCKSTEP_ENGINE_KERNELS_CUDA_ELEMENTWISE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace lockstep::engine::cuda {

// INVALID_ARGUMENT for n < 0 or a null buffer with n > 0; the launch's error otherwise
// (common/cuda/cuda_status.h).
absl::Status Axpy(float a, const float* x, float* y, int64_t n, cudaStream_t stream);
absl::Status Scale(const float* x, float s, float* y, int64_t n, cudaStream_t stream);

}  // namespace lockstep::engine::cuda

#endif  // LOCKSTEP_ENGINE_KERNELS_CUDA_ELEMENTWISE_H_
