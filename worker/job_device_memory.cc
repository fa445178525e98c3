#include "worker/job_device_memory.h"

#include <algorithm>

#include "common/status.h"

namespace lockstep {
namespace worker {

absl::StatusOr<JobDeviceMemory> JobDeviceMemory::Start(distribute::Strategy& strategy) {
  JobDeviceMemory memory;
  const int replicas = static_cast<int>(strategy.extended().worker_devices().size());
  for (int r = 0; r < replicas; ++r) {
    LS_ASSIGN_OR_RETURN(const engine::gpu::GpuDevice* gpu, strategy.extended().replica_gpu(r));
    if (gpu == nullptr) continue;  // a CPU replica
    const bool seen = std::any_of(memory.watched_.begin(), memory.watched_.end(),
                                  [&](const Watched& w) { return w.gpu->context == gpu->context; });
    if (seen) continue;
    gpu->context->ResetAllocatorPeak();
    memory.watched_.push_back({gpu, gpu->context->allocator_stats().device_allocations});
  }
  return memory;
}

std::vector<v1::DeviceMemory> JobDeviceMemory::Read() const {
  std::vector<v1::DeviceMemory> out;
  for (const Watched& w : watched_) {
    const engine::gpu::AllocatorStats stats = w.gpu->context->allocator_stats();
    v1::DeviceMemory& m = out.emplace_back();
    m.set_device(w.gpu->device().name());
    m.set_peak_bytes(stats.peak_bytes_in_use);
    m.set_reserved_bytes(stats.bytes_reserved);
    m.set_device_allocations(stats.device_allocations - w.allocations_before);
  }
  return out;
}

}  // namespace worker
}  // namespace lockstep
