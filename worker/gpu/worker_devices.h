// WorkerDevices: what lockstepd registers with the coordinator and offers its jobs: its
// --cpu_devices logical CPU devices and, on a GPU host, the GPUs --gpus selects among those
// the probe shows (gpu_probe.h in lockstepd; a fake in tests). A GPU host registers both, so
// it serves CPU jobs on its CPUs and GPU jobs (JobSpec.gpus) on its GPUs; the coordinator
// counts a job's replicas by the devices of its kind (coordinator/scheduler.h:
// ReplicasOn). Stateless; thread-safe.
#ifndef LOCKSTEP_WORKER_GPU_WORKER_DEVICES_H_
#define LOCKSTEP_WORKER_GPU_WORKER_DEVICES_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "lockstep/v1/cluster.pb.h"
#include "worker/gpu/gpu_selection.h"

namespace lockstep::worker {

// The GPUs the CUDA runtime shows (ProbeGpus, or a fake).
using GpuProbe = std::function<absl::StatusOr<std::vector<GpuInfo>>()>;

struct WorkerDeviceSet {
  std::vector<v1::Device> registered;  // CPU:0..n-1, then GPU:0..g-1
  std::vector<GpuInfo> gpus;           // the offered GPUs, /gpu:0.. in order
  int num_cpu_devices = 0;
  std::string warning;  // OfferedGpus' (a probe that failed without --gpus), or ""
};

// INVALID_ARGUMENT for cpu_devices < 1 ("--cpu_devices: ..."); OfferedGpus' errors for
// `gpus_flag` ("none": the probe is not called). `cuda_visible_devices`: the variable's
// value, null when unset.
absl::StatusOr<WorkerDeviceSet> WorkerDevices(int cpu_devices, absl::string_view gpus_flag,
                                              const GpuProbe& probe,
                                              const char* cuda_visible_devices);

}  // namespace lockstep::worker

#endif  // LOCKSTEP_WORKER_GPU_WORKER_DEVICES_H_
