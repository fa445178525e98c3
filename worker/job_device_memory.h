// JobDeviceMemory: the device memory of one job's GPU replicas on this worker, as the job
// reports it every summary window (WindowSummary::device_memory: JobReport.device_memory,
// then `lockstep describe`; the chief's TensorBoard scalar) and as lockstepd's gauges
// (WorkerMetrics::DeviceMemory). Each GPU's caching allocator
// (engine/gpu/caching_allocator.h) keeps the figures; this reads them.
//
// lockstepd builds its GPUs' devices once and runs one job after another on them, so the
// allocator's peak would otherwise be the largest of any job since the worker started:
// Start resets each device's peak (to the bytes in use then) and notes its device
// allocations, so the figures are this job's. Reserved bytes are the device's now (the cache
// keeps what an earlier job freed).
//
// Ownership: borrows the devices (the strategy's GpuDeviceSet, which outlives the session
// that holds this). Thread model: Start and Read on the executor's thread; the allocators'
// statistics are thread-safe.
#ifndef LOCKSTEP_WORKER_JOB_DEVICE_MEMORY_H_
#define LOCKSTEP_WORKER_JOB_DEVICE_MEMORY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "distribute/strategy.h"
#include "engine/gpu/gpu_device.h"
#include "lockstep/v1/job.pb.h"

namespace lockstep {
namespace worker {

class JobDeviceMemory {
 public:
  // No devices: a CPU job (Read is empty).
  JobDeviceMemory() = default;

  // Watches the GPUs of `strategy`'s local replicas (each once, in replica order) from now:
  // call it before the job's variables exist. FAILED_PRECONDITION naming a GPU replica the
  // strategy has no device for.
  static absl::StatusOr<JobDeviceMemory> Start(distribute::Strategy& strategy);

  // One entry per watched GPU; empty for a CPU job.
  std::vector<v1::DeviceMemory> Read() const;

 private:
  struct Watched {
    const engine::gpu::GpuDevice* gpu = nullptr;
    int64_t allocations_before = 0;  // the allocator's device allocations at Start
  };
  std::vector<Watched> watched_;
};

}  // namespace worker
}  // namespace lockstep

#endif  // LOCKSTEP_WORKER_JOB_DEVICE_MEMORY_H_
