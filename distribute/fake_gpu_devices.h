// Fake GPUs for CPU tests of the strategies, the trainer and the worker: a GpuDeviceSet over
// one FakeCudaApi (device memory the host cannot read, lazy streams, injectable OOM) with
// the grid emulator's kernels (EmulatedKernels) and FakeBlasApi, the same stack the engine's
// device-generic tests run on the fake "/gpu:0".
//
// Ownership: FakeGpus shares the api and the set; the set shares the api.
#ifndef LOCKSTEP_DISTRIBUTE_FAKE_GPU_DEVICES_H_
#define LOCKSTEP_DISTRIBUTE_FAKE_GPU_DEVICES_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cuda/fake_cuda_api.h"
#include "distribute/gpu_devices.h"

namespace lockstep::distribute {

struct FakeGpus {
  std::shared_ptr<FakeCudaApi> api;  // for injection (FailAllocation) and the fake NCCL
  std::shared_ptr<GpuDeviceSet> devices;
};

// `count` fake GPUs, /gpu:0 .. /gpu:count-1, of `memory_bytes` each.
absl::StatusOr<FakeGpus> MakeFakeGpus(int count, size_t memory_bytes = size_t{256} << 20);

// A host whose fake CUDA shows `visible` GPUs, of which the set holds `ordinals` in order:
// ordinals[i] is /gpu:i (lockstepd --gpus=1,3). The set's errors for an ordinal >= visible.
absl::StatusOr<FakeGpus> MakeFakeGpusAt(int visible, const std::vector<int>& ordinals,
                                        size_t memory_bytes = size_t{256} << 20);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_FAKE_GPU_DEVICES_H_
