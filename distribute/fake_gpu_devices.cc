#include "distribute/fake_gpu_devices.h"

#include <vector>

#include "common/status.h"
#include "engine/kernels/gpu/emulated_kernels.h"
#include "engine/kernels/gpu/fake_blas_api.h"

namespace lockstep::distribute {

absl::StatusOr<FakeGpus> MakeFakeGpus(int count, size_t memory_bytes) {
  std::vector<int> ordinals;
  for (int i = 0; i < count; ++i) ordinals.push_back(i);
  return MakeFakeGpusAt(count, ordinals, memory_bytes);
}

absl::StatusOr<FakeGpus> MakeFakeGpusAt(int visible, const std::vector<int>& ordinals,
                                        size_t memory_bytes) {
  FakeCudaApi::Options options;
  options.device_count = visible;
  options.memory_bytes = memory_bytes;
  LS_ASSIGN_OR_RETURN(std::unique_ptr<FakeCudaApi> owned, FakeCudaApi::Create(options));
  FakeGpus out;
  out.api = std::move(owned);
  FakeCudaApi* fake = out.api.get();
  GpuDeviceSet::Backend backend;
  backend.name = "fake CUDA, emulated kernels";
  backend.kernels =
      [fake](
          engine::gpu::DeviceContext&) -> absl::StatusOr<std::unique_ptr<engine::gpu::GpuKernels>> {
    return std::make_unique<engine::gpu::EmulatedKernels>(fake);
  };
  backend.blas =
      [fake](engine::gpu::DeviceContext&) -> absl::StatusOr<std::unique_ptr<engine::gpu::BlasApi>> {
    return std::make_unique<engine::gpu::FakeBlasApi>(fake);
  };
  LS_ASSIGN_OR_RETURN(out.devices, GpuDeviceSet::Create(out.api, ordinals, backend));
  return out;
}

}  // namespace lockstep::distribute
