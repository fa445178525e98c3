// GpuKernels' test body (gpu_kernels_test_body.h) on a GPU (requires-gpu): the __global__
// launches of CudaKernels over RealCudaApi, against the same CPU computations as the emulator.
#include "engine/kernels/gpu/cuda_kernels.h"

#include "common/cuda/real_cuda_api.h"
#include "engine/kernels/gpu/gpu_kernels_test_body.h"

namespace lockstep::engine::gpu {

struct CudaBackend {
  static absl::StatusOr<GpuBackend> Make() {
    absl::StatusOr<std::unique_ptr<RealCudaApi>> api = RealCudaApi::Create();
    if (!api.ok()) return api.status();
    GpuBackend b;
    b.api = *std::move(api);
    b.kernels = std::make_unique<CudaKernels>();
    return b;
  }
};

using CudaBackends = ::testing::Types<CudaBackend>;
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, GpuKernelsTest, CudaBackends);

}  // namespace lockstep::engine::gpu
