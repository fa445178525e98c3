// RealCudaApi: CudaApi over the CUDA runtime (cudart, linked statically as every
// --config=cuda target is). The stream-ordered pool is each device's default memory pool
// with its release threshold raised to "never", so memory freed with FreeAsync stays in the
// pool and a later MallocAsync reuses it without a synchronisation; PoolStats are the pool's
// used/reserved attributes. Errors become absl::Status through CudaStatus
// (common/cuda/cuda_status.h), prefixed "CudaApi::<Method>"; null handles and device indices
// out of range are refused before CUDA sees them (INVALID_ARGUMENT, as FakeCudaApi does).
// Built only under --config=cuda. Owns nothing but what callers create through it; thread-safe
// (the CUDA runtime is).
#ifndef LOCKSTEP_COMMON_CUDA_REAL_CUDA_API_H_
#define LOCKSTEP_COMMON_CUDA_REAL_CUDA_API_H_

#include <memory>

#include "common/cuda/cuda_api.h"

namespace lockstep {

class RealCudaApi final : public CudaApi {
 public:
  // Counts the devices and configures each default pool. UNAVAILABLE (what to check: the
  // driver, CUDA_VISIBLE_DEVICES) when there is no usable GPU.
  static absl::StatusOr<std::unique_ptr<RealCudaApi>> Create();

  absl::StatusOr<int> DeviceCount() override;
  absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) override;
  absl::Status SetDevice(int device) override;
  absl::StatusOr<int> GetDevice() override;
  absl::StatusOr<void*> Malloc(size_t bytes) override;
  absl::Status Free(void* device_ptr) override;
  absl::StatusOr<void*> MallocAsync(size_t bytes, CudaStream stream) override;
  absl::Status FreeAsync(void* device_ptr, CudaStream stream) override;
  absl::StatusOr<PoolStats> GetPoolStats(int device) override;
  absl::StatusOr<void*> HostAlloc(size_t bytes) override;
  absl::Status HostFree(void* host_ptr) override;
  absl::Status ResetPoolPeak(int device) override;
  absl::Status MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                           CudaStream stream) override;
  absl::Status MemsetAsync(void* device_ptr, int value, size_t bytes, CudaStream stream) override;
  absl::StatusOr<CudaStream> StreamCreate() override;
  absl::Status StreamDestroy(CudaStream stream) override;
  absl::Status StreamSynchronize(CudaStream stream) override;
  absl::StatusOr<CudaEvent> EventCreate() override;
  absl::Status EventRecord(CudaEvent event, CudaStream stream) override;
  absl::Status StreamWaitEvent(CudaStream stream, CudaEvent event) override;
  absl::Status EventSynchronize(CudaEvent event) override;
  absl::StatusOr<bool> EventQuery(CudaEvent event) override;
  absl::Status EventDestroy(CudaEvent event) override;
  absl::StatusOr<CudaEvent> TimingEventCreate() override;
  absl::StatusOr<float> EventElapsedMs(CudaEvent start, CudaEvent end) override;

 private:
  explicit RealCudaApi(int device_count) : device_count_(device_count) {}
  absl::Status CheckDevice(int device, absl::string_view call) const;

  const int device_count_;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CUDA_REAL_CUDA_API_H_
