// CudaApi: the CUDA runtime calls the engine makes (devices, device memory, async copies and
// memsets, streams, events, a stream-ordered memory pool), behind an interface with no CUDA
// header in it, as NcclApi is for NCCL. Code above it (device contexts, allocators, the
// executor on /gpu:N) is tested every day on CPUs against FakeCudaApi, whose device memory
// host code cannot read and whose streams run nothing until synchronised; RealCudaApi
// (--config=cuda) is the thin side that one GPU run confirms. The contract both keep is one
// test body, cuda_api_contract_test.h.
//
// Semantics are CUDA's: every *Async call and every launch is enqueued on a stream and may not
// have run when it returns; work on two streams is ordered only by an event (EventRecord on
// one, StreamWaitEvent on the other); StreamSynchronize / EventSynchronize wait on the host.
// A null CudaStream is the device's default stream. Free (not FreeAsync) waits for the device
// first, as cudaFree does. A copy to or from pageable host memory may make the host wait for
// the stream and stage the bytes (the driver's bounce buffer); only page-locked memory from
// HostAlloc is copied by the DMA engines while the host goes on.
//
// Errors: every method returns a status whose message starts with "CudaApi::<Method>" and
// names its arguments: INVALID_ARGUMENT for a bad argument (a null handle, a device index out
// of range, a pointer that is not device memory), RESOURCE_EXHAUSTED when device memory runs
// out, UNAVAILABLE when there is no usable GPU or driver, INTERNAL for everything else,
// including every call after a kernel fault (the context is unusable: the process must exit).
//
// Thread model: implementations are thread-safe. The current device (SetDevice) is per
// thread, as in CUDA; streams and events belong to the device current when they were made.
#ifndef LOCKSTEP_COMMON_CUDA_CUDA_API_H_
#define LOCKSTEP_COMMON_CUDA_CUDA_API_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lockstep {

// Opaque handles: a cudaStream_t and a cudaEvent_t on the real side.
struct CudaStreamHandle;
struct CudaEventHandle;
using CudaStream = CudaStreamHandle*;
using CudaEvent = CudaEventHandle*;

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

struct DeviceProperties {
  std::string name;              // "NVIDIA H100 80GB HBM3"
  size_t total_memory = 0;       // bytes of device memory
  int multiprocessor_count = 0;  // SMs
  int compute_major = 0;         // compute capability, e.g. 9.0
  int compute_minor = 0;
};

// The device's stream-ordered pool (MallocAsync / FreeAsync), in bytes.
struct PoolStats {
  uint64_t bytes_in_use = 0;       // handed out and not yet freed
  uint64_t peak_bytes_in_use = 0;  // the most bytes_in_use since creation or ResetPoolPeak
  uint64_t bytes_reserved = 0;     // held by the pool (in use, or cached for reuse)
};

class CudaApi {
 public:
  virtual ~CudaApi() = default;

  // Devices.
  virtual absl::StatusOr<int> DeviceCount() = 0;
  virtual absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) = 0;
  // The calling thread's current device, used by every call below that makes something.
  virtual absl::Status SetDevice(int device) = 0;
  virtual absl::StatusOr<int> GetDevice() = 0;

  // Device memory outside the pool: Malloc(0) is null; Free(null) does nothing. Free waits
  // for all work on the device first.
  virtual absl::StatusOr<void*> Malloc(size_t bytes) = 0;
  virtual absl::Status Free(void* device_ptr) = 0;

  // The stream-ordered pool: the memory may be used on `stream` at once; FreeAsync returns it
  // in stream order, so a later MallocAsync on the same stream reuses it with no host wait.
  virtual absl::StatusOr<void*> MallocAsync(size_t bytes, CudaStream stream) = 0;
  virtual absl::Status FreeAsync(void* device_ptr, CudaStream stream) = 0;
  virtual absl::StatusOr<PoolStats> GetPoolStats(int device) = 0;
  // Sets peak_bytes_in_use to bytes_in_use.
  virtual absl::Status ResetPoolPeak(int device) = 0;

  // Page-locked (pinned) host memory, as cudaHostAlloc: what truly asynchronous copies read
  // and write (an input prefetcher's staging buffers, a loss read back without a stall).
  // HostAlloc(0) is null; HostFree(null) does nothing; HostFree of anything else than
  // HostAlloc's memory is INVALID_ARGUMENT. HostFree waits for the device first, as
  // cudaFreeHost does.
  virtual absl::StatusOr<void*> HostAlloc(size_t bytes) = 0;
  virtual absl::Status HostFree(void* host_ptr) = 0;

  // Enqueued on `stream`; host buffers stay the caller's until the stream has passed them.
  virtual absl::Status MemcpyAsync(void* dst, const void* src, size_t bytes, CopyKind kind,
                                   CudaStream stream) = 0;
  // Sets `bytes` bytes at `device_ptr` to (unsigned char)value.
  virtual absl::Status MemsetAsync(void* device_ptr, int value, size_t bytes,
                                   CudaStream stream) = 0;

  // Streams (non-blocking: they never wait for the default stream implicitly).
  virtual absl::StatusOr<CudaStream> StreamCreate() = 0;
  // Work already enqueued still runs.
  virtual absl::Status StreamDestroy(CudaStream stream) = 0;
  virtual absl::Status StreamSynchronize(CudaStream stream) = 0;

  // Events (without timing; TimingEventCreate below makes those that time).
  virtual absl::StatusOr<CudaEvent> EventCreate() = 0;
  // Captures the work enqueued on `stream` so far.
  virtual absl::Status EventRecord(CudaEvent event, CudaStream stream) = 0;
  // Work enqueued on `stream` after this call starts only after the event's captured work.
  virtual absl::Status StreamWaitEvent(CudaStream stream, CudaEvent event) = 0;
  virtual absl::Status EventSynchronize(CudaEvent event) = 0;
  // cudaEventQuery: whether the captured work has finished (true for an event never
  // recorded), without blocking; a caller polls it where it must stay interruptible (NCCL's
  // Wait, which a deadline or an abort ends). Not a host wait.
  virtual absl::StatusOr<bool> EventQuery(CudaEvent event) = 0;
  virtual absl::Status EventDestroy(CudaEvent event) = 0;

  // Timing events (a profiler's marks: engine/gpu/op_profiler.h). TimingEventCreate makes an
  // event that records a timestamp too (cudaEventCreate without cudaEventDisableTiming; the
  // other event calls take it). EventElapsedMs is the device time from `start`'s capture to
  // `end`'s, in milliseconds (cudaEventElapsedTime): kernel time and any
  // time the stream sat idle in between. INVALID_ARGUMENT for a null event or one made without
  // timing or never recorded; FAILED_PRECONDITION when either's work has not completed yet
  // (synchronise first: it never waits).
  virtual absl::StatusOr<CudaEvent> TimingEventCreate() = 0;
  virtual absl::StatusOr<float> EventElapsedMs(CudaEvent start, CudaEvent end) = 0;
};

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CUDA_CUDA_API_H_
