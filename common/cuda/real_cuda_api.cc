#include "common/cuda/real_cuda_api.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda/cuda_status.h"

namespace lockstep {
namespace {

cudaStream_t Native(CudaStream s) { return reinterpret_cast<cudaStream_t>(s); }
cudaEvent_t Native(CudaEvent e) { return reinterpret_cast<cudaEvent_t>(e); }

absl::Status Check(cudaError_t error, absl::string_view call) {
  return CudaStatus(error, absl::StrCat("CudaApi::", call));
}

cudaMemcpyKind NativeKind(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice:
      return cudaMemcpyHostToDevice;
    case CopyKind::kDeviceToHost:
      return cudaMemcpyDeviceToHost;
    case CopyKind::kDeviceToDevice:
      return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

absl::Status NullEvent(absl::string_view call) {
  return absl::InvalidArgumentError(absl::StrCat("CudaApi::", call, ": null event"));
}

absl::StatusOr<cudaMemPool_t> DefaultPool(int device, absl::string_view call) {
  cudaMemPool_t pool;
  if (absl::Status s = Check(cudaDeviceGetDefaultMemPool(&pool, device),
                             absl::StrCat(call, ": cudaDeviceGetDefaultMemPool(", device, ")"));
      !s.ok()) {
    return s;
  }
  return pool;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RealCudaApi>> RealCudaApi::Create() {
  int count = 0;
  if (absl::Status s = Check(cudaGetDeviceCount(&count), "Create: cudaGetDeviceCount"); !s.ok()) {
    return s;
  }
  for (int d = 0; d < count; ++d) {
    absl::StatusOr<cudaMemPool_t> pool = DefaultPool(d, "Create");
    if (!pool.ok()) return pool.status();
    // Keep freed memory in the pool: without this, a synchronisation returns it to the
    // driver and the next step's MallocAsync pays for fresh memory.
    uint64_t threshold = UINT64_MAX;
    if (absl::Status s =
            Check(cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrReleaseThreshold, &threshold),
                  absl::StrCat("Create: cudaMemPoolSetAttribute(ReleaseThreshold) of device ", d));
        !s.ok()) {
      return s;
    }
  }
  return std::unique_ptr<RealCudaApi>(new RealCudaApi(count));
}

absl::Status RealCudaApi::CheckDevice(int device, absl::string_view call) const {
  if (device >= 0 && device < device_count_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("CudaApi::", call, "(", device, "): no device ",
                                                 device, " (there are ", device_count_, ")"));
}

absl::StatusOr<int> RealCudaApi::DeviceCount() {
  int count = 0;
  if (absl::Status s = Check(cudaGetDeviceCount(&count), "DeviceCount"); !s.ok()) return s;
  return count;
}

absl::StatusOr<DeviceProperties> RealCudaApi::GetDeviceProperties(int device) {
  if (absl::Status s = CheckDevice(device, "GetDeviceProperties"); !s.ok()) return s;
  cudaDeviceProp prop;
  if (absl::Status s = Check(cudaGetDeviceProperties(&prop, device),
                             absl::StrCat("GetDeviceProperties(", device, ")"));
      !s.ok()) {
    return s;
  }
  DeviceProperties p;
  p.name = prop.name;
  p.total_memory = prop.totalGlobalMem;
  p.multiprocessor_count = prop.multiProcessorCount;
  p.compute_major = prop.major;
  p.compute_minor = prop.minor;
  return p;
}

absl::Status RealCudaApi::SetDevice(int device) {
  if (absl::Status s = CheckDevice(device, "SetDevice"); !s.ok()) return s;
  return Check(cudaSetDevice(device), absl::StrCat("SetDevice(", device, ")"));
}

absl::StatusOr<int> RealCudaApi::GetDevice() {
  int device = 0;
  if (absl::Status s = Check(cudaGetDevice(&device), "GetDevice"); !s.ok()) return s;
  return device;
}

absl::StatusOr<void*> RealCudaApi::Malloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  if (absl::Status s = Check(cudaMalloc(&p, bytes), absl::StrCat("Malloc(", bytes, " bytes)"));
      !s.ok()) {
    return s;
  }
  return p;
}

absl::Status RealCudaApi::Free(void* device_ptr) {
  if (device_ptr == nullptr) return absl::OkStatus();
  return Check(cudaFree(device_ptr), absl::StrFormat("Free(%p)", device_ptr));
}

absl::StatusOr<void*> RealCudaApi::MallocAsync(size_t bytes, CudaStream stream) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  if (absl::Status s = Check(cudaMallocAsync(&p, bytes, Native(stream)),
                             absl::StrCat("MallocAsync(", bytes, " bytes)"));
      !s.ok()) {
    return s;
  }
  return p;
}

absl::Status RealCudaApi::FreeAsync(void* device_ptr, CudaStream stream) {
  if (device_ptr == nullptr) return absl::OkStatus();
  return Check(cudaFreeAsync(device_ptr, Native(stream)),
               absl::StrFormat("FreeAsync(%p)", device_ptr));
}

absl::StatusOr<PoolStats> RealCudaApi::GetPoolStats(int device) {
  if (absl::Status s = CheckDevice(device, "GetPoolStats"); !s.ok()) return s;
  absl::StatusOr<cudaMemPool_t> pool = DefaultPool(device, "GetPoolStats");
  if (!pool.ok()) return pool.status();
  PoolStats stats;
  struct {
    cudaMemPoolAttr attr;
    uint64_t* out;
    const char* name;
  } reads[] = {{cudaMemPoolAttrUsedMemCurrent, &stats.bytes_in_use, "UsedMemCurrent"},
               {cudaMemPoolAttrUsedMemHigh, &stats.peak_bytes_in_use, "UsedMemHigh"},
               {cudaMemPoolAttrReservedMemCurrent, &stats.bytes_reserved, "ReservedMemCurrent"}};
  for (const auto& r : reads) {
    if (absl::Status s = Check(cudaMemPoolGetAttribute(*pool, r.attr, r.out),
                               absl::StrCat("GetPoolStats(", device, "): ", r.name));
        !s.ok()) {
      return s;
    }
  }
  return stats;
}

absl::Status RealCudaApi::ResetPoolPeak(int device) {
  if (absl::Status s = CheckDevice(device, "ResetPoolPeak"); !s.ok()) return s;
  absl::StatusOr<cudaMemPool_t> pool = DefaultPool(device, "ResetPoolPeak");
  if (!pool.ok()) return pool.status();
  uint64_t zero = 0;  // the only value CUDA accepts: the high mark restarts at current use
  return Check(cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrUsedMemHigh, &zero),
               absl::StrCat("ResetPoolPeak(", device, ")"));
}

absl::StatusOr<void*> RealCudaApi::HostAlloc(size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = nullptr;
  if (absl::Status s = Check(cudaHostAlloc(&p, bytes, cudaHostAllocDefault),
                             absl::StrCat("HostAlloc(", bytes, " bytes)"));
      !s.ok()) {
    return s;
  }
  return p;
}

absl::Status RealCudaApi::HostFree(void* host_ptr) {
  if (host_ptr == nullptr) return absl::OkStatus();
  return Check(cudaFreeHost(host_ptr), absl::StrFormat("HostFree(%p)", host_ptr));
}

absl::Status RealCudaApi::MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                                      CudaStream stream) {
  const std::string call = absl::StrCat("MemcpyAsync(", bytes, " bytes)");
  if (bytes == 0) return absl::OkStatus();
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaApi::", call, ": null ", dst == nullptr ? "destination" : "source"));
  }
  return Check(cudaMemcpyAsync(dst, src, bytes, NativeKind(kind), Native(stream)), call);
}

absl::Status RealCudaApi::MemsetAsync(void* device_ptr, int value, size_t bytes,
                                      CudaStream stream) {
  const std::string call = absl::StrCat("MemsetAsync(", bytes, " bytes)");
  if (bytes == 0) return absl::OkStatus();
  if (device_ptr == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("CudaApi::", call, ": null destination"));
  }
  return Check(cudaMemsetAsync(device_ptr, value, bytes, Native(stream)), call);
}

absl::StatusOr<CudaStream> RealCudaApi::StreamCreate() {
  cudaStream_t s = nullptr;
  if (absl::Status st = Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "StreamCreate");
      !st.ok()) {
    return st;
  }
  return reinterpret_cast<CudaStream>(s);
}

absl::Status RealCudaApi::StreamDestroy(CudaStream stream) {
  if (stream == nullptr) {
    return absl::InvalidArgumentError("CudaApi::StreamDestroy: the default stream (null)");
  }
  return Check(cudaStreamDestroy(Native(stream)), "StreamDestroy");
}

absl::Status RealCudaApi::StreamSynchronize(CudaStream stream) {
  return Check(cudaStreamSynchronize(Native(stream)), "StreamSynchronize");
}

absl::StatusOr<CudaEvent> RealCudaApi::EventCreate() {
  cudaEvent_t e = nullptr;
  if (absl::Status s = Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "EventCreate");
      !s.ok()) {
    return s;
  }
  return reinterpret_cast<CudaEvent>(e);
}

absl::Status RealCudaApi::EventRecord(CudaEvent event, CudaStream stream) {
  if (event == nullptr) return NullEvent("EventRecord");
  return Check(cudaEventRecord(Native(event), Native(stream)), "EventRecord");
}

absl::Status RealCudaApi::StreamWaitEvent(CudaStream stream, CudaEvent event) {
  if (event == nullptr) return NullEvent("StreamWaitEvent");
  return Check(cudaStreamWaitEvent(Native(stream), Native(event), 0), "StreamWaitEvent");
}

absl::Status RealCudaApi::EventSynchronize(CudaEvent event) {
  if (event == nullptr) return NullEvent("EventSynchronize");
  return Check(cudaEventSynchronize(Native(event)), "EventSynchronize");
}

absl::StatusOr<bool> RealCudaApi::EventQuery(CudaEvent event) {
  if (event == nullptr) return NullEvent("EventQuery");
  const cudaError_t e = cudaEventQuery(Native(event));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();  // not an error: clear it so the next call does not see it
    return false;
  }
  if (absl::Status s = Check(e, "EventQuery"); !s.ok()) return s;
  return true;
}

absl::Status RealCudaApi::EventDestroy(CudaEvent event) {
  if (event == nullptr) return NullEvent("EventDestroy");
  return Check(cudaEventDestroy(Native(event)), "EventDestroy");
}

absl::StatusOr<CudaEvent> RealCudaApi::TimingEventCreate() {
  cudaEvent_t e = nullptr;
  if (absl::Status s = Check(cudaEventCreateWithFlags(&e, cudaEventDefault), "TimingEventCreate");
      !s.ok()) {
    return s;
  }
  return reinterpret_cast<CudaEvent>(e);
}

absl::StatusOr<float> RealCudaApi::EventElapsedMs(CudaEvent start, CudaEvent end) {
  if (start == nullptr || end == nullptr) return NullEvent("EventElapsedMs");
  float ms = 0;
  const cudaError_t error = cudaEventElapsedTime(&ms, Native(start), Native(end));
  if (error == cudaErrorNotReady) {
    (void)cudaGetLastError();  // not sticky: clear it
    return absl::FailedPreconditionError(
        "CudaApi::EventElapsedMs: an event's work has not completed (synchronise first)");
  }
  if (error == cudaErrorInvalidResourceHandle) {
    (void)cudaGetLastError();
    return absl::InvalidArgumentError(
        "CudaApi::EventElapsedMs: an event was never recorded or was made without timing "
        "(TimingEventCreate)");
  }
  if (absl::Status s = Check(error, "EventElapsedMs"); !s.ok()) return s;
  return ms;
}

}  // namespace lockstep
