// Real GPUs for the strategies (--config=cuda only): a GpuDeviceSet over RealCudaApi with the
// CUDA kernels (CudaKernels) and cuBLASLt (RealBlasApi, TF32 off), one BLAS handle per device.
// lockstepd builds its replicas' GPUs with it (worker/main.cc); the requires-gpu
// strategy test too.
#ifndef LOCKSTEP_DISTRIBUTE_CUDA_GPU_DEVICES_H_
#define LOCKSTEP_DISTRIBUTE_CUDA_GPU_DEVICES_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "distribute/gpu_devices.h"

namespace lockstep::distribute {

// The GPUs at CUDA ordinals `ordinals`, ordinals[i] named /gpu:i (GpuDeviceSet::Create).
// UNAVAILABLE naming what is missing (the driver, libcublasLt) on a host that cannot run them.
absl::StatusOr<std::shared_ptr<GpuDeviceSet>> MakeCudaGpus(const std::vector<int>& ordinals);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_CUDA_GPU_DEVICES_H_
