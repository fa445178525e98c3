// The sequence-model op tests (seq_ops_test_body.h) on a real GPU (requires-gpu): RealCudaApi,
// the CUDA kernels and cuBLASLt (TF32 off), "/gpu:0" against "/cpu:0".
#include "common/cuda/real_cuda_api.h"
#include "engine/kernels/gpu/cuda_kernels.h"
#include "engine/kernels/gpu/real_blas_api.h"
#include "engine/seq_ops_test_body.h"

namespace lockstep::engine {

struct RealGpu {
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

using Devices = ::testing::Types<RealGpu>;
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, SeqOpsTest, Devices);

}  // namespace lockstep::engine
