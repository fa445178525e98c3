// DeviceContext: one GPU as the engine uses it: its properties, a compute stream, a caching
// allocator ordered on that stream, host<->device copies enqueued on it, and Synchronize. The
// code above it (device-aware tensors, the executor on /gpu:N) is tested on FakeCudaApi.
//
// Every call first makes the context's device current on the calling thread (CUDA's current
// device is per thread), so one thread may drive several contexts. Copies are enqueued and
// return at once: a host buffer must stay alive and unchanged (source) or unread
// (destination) until Synchronize returns; the fake runs nothing before that, so a missing
// Synchronize shows in every test. Errors are the CudaApi's, with the device named.
//
// Ownership: owns the stream and the allocator (and so every block it handed out); borrows
// the CudaApi, which must outlive it. Thread model: one thread at a time (the stream is the
// order of its work); Allocate and Free are thread-safe.
#ifndef LOCKSTEP_ENGINE_GPU_DEVICE_CONTEXT_H_
#define LOCKSTEP_ENGINE_GPU_DEVICE_CONTEXT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/cuda/cuda_api.h"
#include "engine/gpu/caching_allocator.h"

namespace lockstep::engine::gpu {

class DeviceContext {
 public:
  // INVALID_ARGUMENT when `device` (a CUDA ordinal) is not one of the API's devices; the API's
  // errors otherwise (UNAVAILABLE without a usable GPU). The engine names it "/gpu:`index`":
  // its position among the worker's GPUs, as TensorFlow's device id maps onto the platform's
  // (lockstepd --gpus=1,3: /gpu:0 is CUDA device 1, /gpu:1 is CUDA device 3). Without
  // `index`, the name is the ordinal.
  static absl::StatusOr<std::unique_ptr<DeviceContext>> Create(CudaApi* api, int device);
  static absl::StatusOr<std::unique_ptr<DeviceContext>> Create(CudaApi* api, int device, int index);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return device_; }  // the CUDA ordinal: what CudaApi calls take
  int index() const { return index_; }    // the engine's /gpu:N (Device, tensors' names)
  const DeviceProperties& properties() const { return properties_; }
  CudaStream stream() const { return stream_; }
  CudaApi& api() { return *api_; }

  // Device memory from the caching allocator (see CachingAllocator).
  absl::StatusOr<void*> Allocate(size_t bytes);
  absl::Status Free(void* device_ptr);
  // Device memory for work on another stream, counted in the allocator's statistics
  // (CachingAllocator::AllocateOutside: InputStager's slots). The pointer must go before
  // the context.
  absl::StatusOr<std::shared_ptr<char>> AllocateOutside(size_t bytes);
  AllocatorStats allocator_stats() const { return allocator_->Stats(); }
  // The peak of the bytes in use starts again from the bytes in use now (a new job).
  void ResetAllocatorPeak() { allocator_->ResetPeak(); }

  // Enqueued on the stream.
  absl::Status CopyToDevice(void* device_dst, const void* host_src, size_t bytes);
  absl::Status CopyToHost(void* host_dst, const void* device_src, size_t bytes);
  absl::Status CopyOnDevice(void* device_dst, const void* device_src, size_t bytes);
  absl::Status Zero(void* device_ptr, size_t bytes);
  // Waits until everything enqueued has run; a kernel fault shows here (sticky INTERNAL).
  absl::Status Synchronize();

 private:
  DeviceContext(CudaApi* api, int device, int index, DeviceProperties properties,
                CudaStream stream);
  absl::Status Current() const;
  absl::Status Named(absl::Status s) const;

  CudaApi* const api_;
  const int device_;
  const int index_;
  const DeviceProperties properties_;
  const CudaStream stream_;
  std::unique_ptr<CachingAllocator> allocator_;
};

}  // namespace lockstep::engine::gpu

#endif  // LOCKSTEP_ENGINE_GPU_DEVICE_CONTEXT_H_
