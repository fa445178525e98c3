// RealGpuEnv: the device-generic tests' "/gpu:0" on a real GPU (device_test_env.h's DeviceEnv
// over RealCudaApi, the CUDA kernels and cuBLASLt with TF32 off), for the requires-gpu
// instantiations (device_generic_cuda_test, seq_ops_cuda_test). Not bitwise: CUDA's expf and
// cuBLAS's order of sums differ from the CPU's.
#ifndef LOCKSTEP_ENGINE_REAL_GPU_ENV_H_
#define LOCKSTEP_ENGINE_REAL_GPU_ENV_H_

#include <memory>

#include "common/cuda/real_cuda_api.h"
#include "engine/device_test_env.h"
#include "engine/kernels/gpu/cuda_kernels.h"
#include "engine/kernels/gpu/real_blas_api.h"

namespace lockstep::engine {

struct RealGpuEnv {
  static constexpr bool kBitwise = false;
  static absl::StatusOr<std::unique_ptr<DeviceEnv>> Make() {
    LS_ASSIGN_OR_RETURN(std::unique_ptr<RealCudaApi> api, RealCudaApi::Create());
    LS_ASSIGN_OR_RETURN(std::unique_ptr<gpu::DeviceContext> context,
                        gpu::DeviceContext::Create(api.get(), 0));
    LS_ASSIGN_OR_RETURN(std::unique_ptr<gpu::RealBlasApi> blas,
                        gpu::RealBlasApi::Create(api.get()));
    return std::unique_ptr<DeviceEnv>(new GpuDeviceEnv(
        std::move(api), std::move(context), std::make_unique<gpu::CudaKernels>(), std::move(blas)));
  }
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_REAL_GPU_ENV_H_
