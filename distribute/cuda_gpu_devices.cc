#include "distribute/cuda_gpu_devices.h"

#include "common/cuda/real_cuda_api.h"
#include "common/status.h"
#include "engine/kernels/gpu/cuda_kernels.h"
#include "engine/kernels/gpu/real_blas_api.h"

namespace lockstep::distribute {

absl::StatusOr<std::shared_ptr<GpuDeviceSet>> MakeCudaGpus(const std::vector<int>& ordinals) {
  LS_ASSIGN_OR_RETURN(std::unique_ptr<RealCudaApi> real, RealCudaApi::Create());
  std::shared_ptr<CudaApi> api = std::move(real);
  CudaApi* raw = api.get();
  GpuDeviceSet::Backend backend;
  backend.name = "CUDA, cuBLASLt";
  backend.kernels =
      [](engine::gpu::DeviceContext&) -> absl::StatusOr<std::unique_ptr<engine::gpu::GpuKernels>> {
    return std::make_unique<engine::gpu::CudaKernels>();
  };
  // RealBlasApi binds the device current at Create: DeviceContext::Create made it current.
  backend.blas = [raw](engine::gpu::DeviceContext& context)
      -> absl::StatusOr<std::unique_ptr<engine::gpu::BlasApi>> {
    LS_RETURN_IF_ERROR(raw->SetDevice(context.device()));
    LS_ASSIGN_OR_RETURN(std::unique_ptr<engine::gpu::RealBlasApi> blas,
                        engine::gpu::RealBlasApi::Create(raw));
    return std::unique_ptr<engine::gpu::BlasApi>(std::move(blas));
  };
  return GpuDeviceSet::Create(std::move(api), ordinals, backend);
}

}  // namespace lockstep::distribute
