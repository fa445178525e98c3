// GpuDeviceSet: the GPU devices of one worker's local replicas, each "/gpu:N" as the engine
// runs on it (engine/gpu/gpu_device.h: a DeviceContext, its GpuKernels and its BlasApi). The
// strategies take it in LocalDevices::gpus and hand each GPU replica its device: its
// variables' copies live in that device's memory, its Executor and Optimizer run there.
//
// Made by a factory over a CudaApi: RealCudaApi with CudaKernels and RealBlasApi in a
// --config=cuda worker (worker/gpu/worker_gpu_devices.h), FakeCudaApi with the grid emulator
// and FakeBlasApi in CPU tests (fake_gpu_devices.h). The strategies never know which.
//
// Ownership: owns every device's profiler, BLAS, kernels and context (destroyed in that order), and
// shares the CudaApi; every tensor, executor and optimizer on one of its devices must go
// before it (a Strategy holds it; a Trainer, which borrows its strategy, goes first).
// Thread model: Find is thread-safe; each device is driven by one thread at a time (its
// replica's), as DeviceContext.
#ifndef LOCKSTEP_DISTRIBUTE_GPU_DEVICES_H_
#define LOCKSTEP_DISTRIBUTE_GPU_DEVICES_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cuda/cuda_api.h"
#include "engine/device.h"
#include "engine/gpu/device_context.h"
#include "engine/gpu/gpu_device.h"
#include "engine/gpu/op_profiler.h"
#include "engine/kernels/gpu/blas_api.h"
#include "engine/kernels/gpu/gpu_kernels.h"

namespace lockstep::distribute {

class GpuDeviceSet {
 public:
  // How a device's kernels and BLAS are made once its context exists.
  struct Backend {
    std::string name;  // "cuda", "fake": for messages
    std::function<absl::StatusOr<std::unique_ptr<engine::gpu::GpuKernels>>(
        engine::gpu::DeviceContext&)>
        kernels;
    std::function<absl::StatusOr<std::unique_ptr<engine::gpu::BlasApi>>(
        engine::gpu::DeviceContext&)>
        blas;
  };

  // Builds one device per CUDA ordinal of `ordinals` over `api`, named by position as
  // TensorFlow names a process's GPUs: ordinals[i] is "/gpu:i" (lockstepd --gpus=1,3 gives
  // /gpu:0 on CUDA device 1 and /gpu:1 on CUDA device 3, as CUDA_VISIBLE_DEVICES=1,3 would).
  // INVALID_ARGUMENT for a repeated ordinal or an incomplete backend; the context's, kernels'
  // and BLAS's errors naming the device (INVALID_ARGUMENT for an ordinal the API lacks).
  static absl::StatusOr<std::shared_ptr<GpuDeviceSet>> Create(std::shared_ptr<CudaApi> api,
                                                              const std::vector<int>& ordinals,
                                                              const Backend& backend);
  ~GpuDeviceSet();
  GpuDeviceSet(const GpuDeviceSet&) = delete;
  GpuDeviceSet& operator=(const GpuDeviceSet&) = delete;

  // The handles of "/gpu:index" (its context's device() is the CUDA ordinal under it); null
  // when this set did not build it.
  const engine::gpu::GpuDevice* Find(int index) const;
  // The handles of `device` for a replica: FAILED_PRECONDITION naming it when it is a GPU this
  // set lacks (or there is no set: `set` may be null); null for a CPU device.
  static absl::StatusOr<const engine::gpu::GpuDevice*> ForReplica(const GpuDeviceSet* set,
                                                                  const engine::Device& device);
  // Per-op GPU timing on "/gpu:index" (engine/gpu/op_profiler.h), for a profiling run: its
  // GpuDevice::profiler is set, so every executor and optimizer on it marks its work from
  // their next step on. The set owns the profiler (one per device: a second call returns the
  // same). NOT_FOUND for a device this set did not build. Call it before the replicas run.
  absl::StatusOr<engine::gpu::OpProfiler*> StartProfiling(int index);
  // The devices' CUDA ordinals, in the order given to Create (/gpu:0 first).
  std::vector<int> ordinals() const;
  CudaApi& api() { return *api_; }
  const std::string& backend_name() const { return backend_name_; }

 private:
  struct Entry {  // entries_[i] is /gpu:i
    std::unique_ptr<engine::gpu::DeviceContext> context;
    std::unique_ptr<engine::gpu::GpuKernels> kernels;
    std::unique_ptr<engine::gpu::BlasApi> blas;
    std::unique_ptr<engine::gpu::OpProfiler> profiler;  // StartProfiling's
    engine::gpu::GpuDevice handles;
  };
  GpuDeviceSet(std::shared_ptr<CudaApi> api, std::string backend_name)
      : api_(std::move(api)), backend_name_(std::move(backend_name)) {}

  std::shared_ptr<CudaApi> api_;  // declared first: goes last
  const std::string backend_name_;
  std::vector<std::unique_ptr<Entry>> entries_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_GPU_DEVICES_H_
