// GpuKernels: the GPU device's f32 kernels as launches on a CudaApi stream over device
// buffers, behind an interface so that what calls them is tested without a GPU:
// EmulatedKernels runs the bodies (kernel_bodies.h) on the grid emulator over FakeCudaApi's
// memory, CudaKernels (--config=cuda) launches the same bodies as __global__ kernels. Every
// launch is enqueued and returns at once; the caller synchronises the stream. Buffers may be
// the same array where a kernel reads and writes element i only (Relu in place, Axpy's y).
//
// Errors at launch: INVALID_ARGUMENT naming the kernel for a negative count or a null buffer
// with elements; the emulator also refuses buffers outside an allocation. Errors while the
// kernel runs (a fault; in emulation, an element not written exactly once or an access out of
// bounds) are sticky and reported by the synchronisation, as CUDA does.
// Thread model: implementations are thread-safe; a stream is used by one thread at a time.
#ifndef LOCKSTEP_ENGINE_KERNELS_GPU_GPU_KERNELS_H_
#define LOCKSTEP_ENGINE_KERNELS_GPU_GPU_KERNELS_H_

#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "common/cuda/cuda_api.h"
#include "engine/kernels/gpu/optimizer_params.h"

namespace lockstep::engine::gpu {

class GpuKernels {
 public:
  virtual ~GpuKernels() = default;
  // y = a * x + y (one rounding: fmaf).
  virtual absl::Status Axpy(float a, const float* x, float* y, int64_t n, CudaStream s) = 0;
  virtual absl::Status Scale(const float* x, float scale, float* y, int64_t n, CudaStream s) = 0;
  virtual absl::Status Add(const float* a, const float* b, float* y, int64_t n, CudaStream s) = 0;
  virtual absl::Status Relu(const float* x, float* y, int64_t n, CudaStream s) = 0;
  virtual absl::Status ReluGrad(const float* x, const float* dy, float* dx, int64_t n,
                                CudaStream s) = 0;
  // Row-major [rows, cols].
  virtual absl::Status SoftmaxRows(const float* x, float* y, int64_t rows, int64_t cols,
                                   CudaStream s) = 0;
  // y has `rows` elements.
  virtual absl::Status RowSum(const float* x, float* y, int64_t rows, int64_t cols,
                              CudaStream s) = 0;
  // One variable's fused update: v and w (and m, s) updated in place.
  virtual absl::Status Momentum(const MomentumParams& p, const float* g, float* v, float* w,
                                int64_t n, CudaStream s) = 0;
  virtual absl::Status Adam(const AdamParams& p, const float* g, float* m, float* v, float* w,
                            int64_t n, CudaStream s) = 0;
};

// The launch-time checks both implementations make: INVALID_ARGUMENT "<kernel>: ..." for
// n < 0 or a null buffer when n > 0.
absl::Status CheckLaunch(const char* kernel, int64_t n, std::initializer_list<const void*> buffers);

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_KERNELS_GPU_GPU_KERNELS_H_
