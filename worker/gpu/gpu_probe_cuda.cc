// ProbeGpus in the --config=cuda build: the CUDA runtime's device properties.
#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "common/cuda/cuda_status.h"
#include "worker/gpu/gpu_probe.h"

namespace lockstep::worker {

absl::StatusOr<std::vector<GpuInfo>> ProbeGpus() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  // No device (or CUDA_VISIBLE_DEVICES hides them all): a CPU-only host, not an error.
  if (e == cudaErrorNoDevice) return std::vector<GpuInfo>();
  if (absl::Status s = CudaStatus(e, "counting GPUs (cudaGetDeviceCount)"); !s.ok()) return s;
  std::vector<GpuInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (absl::Status s = CudaStatus(cudaGetDeviceProperties(&prop, i),
                                    absl::StrCat("reading the properties of GPU ", i));
        !s.ok()) {
      return s;
    }
    char bus[32] = {0};
    if (absl::Status s = CudaStatus(cudaDeviceGetPCIBusId(bus, sizeof(bus), i),
                                    absl::StrCat("reading the PCI bus id of GPU ", i));
        !s.ok()) {
      return s;
    }
    GpuInfo g;
    g.ordinal = i;
    g.product = prop.name;
    g.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    g.compute_major = prop.major;
    g.compute_minor = prop.minor;
    g.pci_bus_id = bus;
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace lockstep::worker
