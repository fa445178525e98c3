#include "worker/gpu/worker_devices.h"

#include "absl/strings/str_cat.h"

namespace lockstep::worker {

absl::StatusOr<WorkerDeviceSet> WorkerDevices(int cpu_devices, absl::string_view gpus_flag,
                                              const GpuProbe& probe,
                                              const char* cuda_visible_devices) {
  if (cpu_devices < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cpu_devices: expected at least 1, got ", cpu_devices));
  }
  WorkerDeviceSet set;
  set.num_cpu_devices = cpu_devices;
  for (int i = 0; i < cpu_devices; ++i) {
    v1::Device d;
    d.set_kind(v1::Device::CPU);
    d.set_index(i);
    d.set_name(absl::StrCat("CPU:", i));
    set.registered.push_back(d);
  }
  const absl::StatusOr<std::vector<GpuInfo>> probed =
      gpus_flag == "none" ? absl::StatusOr<std::vector<GpuInfo>>(std::vector<GpuInfo>()) : probe();
  absl::StatusOr<std::vector<GpuInfo>> gpus =
      OfferedGpus(gpus_flag, probed, cuda_visible_devices, &set.warning);
  if (!gpus.ok()) return gpus.status();
  set.gpus = *std::move(gpus);
  for (v1::Device& d : GpuDevices(set.gpus)) set.registered.push_back(std::move(d));
  return set;
}

}  // namespace lockstep::worker
