// NcclApi: the handful of NCCL calls (and the CUDA stream query) the NCCL communicator makes,
// behind an interface, so that its host-side logic (id bootstrap, non-blocking init,
// deadlines, async-error polling, abort) is tested without a GPU against FakeNcclApi.
// RealNcclApi (--config=cuda) loads libnccl.so.2 at run time and is the one place where
// ncclResult_t becomes absl::Status.
//
// Communicators are non-blocking (ncclConfig_t.blocking = 0): CommInitRank and the
// collectives return at once; AsyncState says when the communicator is idle again, and
// StreamState when the stream's work has finished. Thread model: an implementation is
// thread-safe; a communicator handle is used by one thread at a time, except CommAbort, which
// any thread may call.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_NCCL_API_H_
#define LOCKSTEP_COLLECTIVES_NCCL_NCCL_API_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "collectives/types.h"

namespace lockstep::collectives::nccl {

using NcclComm = void*;      // ncclComm_t
using DeviceStream = void*;  // cudaStream_t

// NCCL_UNIQUE_ID_BYTES.
inline constexpr size_t kNcclUniqueIdBytes = 128;

// Whether a non-blocking communicator (or a stream) has finished its work.
enum class NcclProgress { kDone, kInProgress };

class NcclApi {
 public:
  virtual ~NcclApi() = default;

  // ncclGetUniqueId: kNcclUniqueIdBytes opaque bytes (it also starts NCCL's bootstrap socket).
  virtual absl::StatusOr<std::string> GetUniqueId() = 0;
  // ncclCommInitRankConfig with blocking = 0 on the current CUDA device: returns the handle
  // while the init goes on; AsyncState says when it is done.
  virtual absl::StatusOr<NcclComm> CommInitRank(int nranks, absl::string_view unique_id,
                                                int rank) = 0;
  // ncclCommGetAsyncError: kInProgress while an init or an enqueue runs, kDone when idle,
  // or the communicator's error (a peer's failure, a network error).
  virtual absl::StatusOr<NcclProgress> AsyncState(NcclComm comm) = 0;
  // ncclCommAbort: ends every pending operation and frees the communicator.
  virtual absl::Status CommAbort(NcclComm comm) = 0;
  // ncclCommFinalize, then ncclCommDestroy, once no operation is pending.
  virtual absl::Status CommDestroy(NcclComm comm) = 0;

  // Enqueue on `stream`; count in elements, buffers on the device.
  virtual absl::Status AllReduce(const void* send, void* recv, size_t count, DType dtype,
                                 ReduceOp op, NcclComm comm, DeviceStream stream) = 0;
  virtual absl::Status Broadcast(const void* send, void* recv, size_t count, DType dtype, int root,
                                 NcclComm comm, DeviceStream stream) = 0;
  virtual absl::Status AllGather(const void* send, void* recv, size_t count, DType dtype,
                                 NcclComm comm, DeviceStream stream) = 0;
  virtual absl::Status ReduceScatter(const void* send, void* recv, size_t count, DType dtype,
                                     ReduceOp op, NcclComm comm, DeviceStream stream) = 0;

  // ncclGroupStart / ncclGroupEnd: the calls between them, on the communicators of several
  // GPUs of this process, are issued as one (NCCL requires it when one thread drives several
  // GPUs). With non-blocking communicators the work goes on after GroupEnd; AsyncState of each
  // communicator says when it is done.
  virtual absl::Status GroupStart() = 0;
  virtual absl::Status GroupEnd() = 0;
  // cudaSetDevice: the GPU the next CommInitRank and DeviceAlloc of this thread use.
  virtual absl::Status SetDevice(int device) = 0;

  // cudaStreamQuery: kDone when everything enqueued on `stream` has finished.
  virtual absl::StatusOr<NcclProgress> StreamState(DeviceStream stream) = 0;
  // cudaMalloc / cudaFree of a small scratch buffer (the barrier's).
  virtual absl::StatusOr<void*> DeviceAlloc(size_t bytes) = 0;
  virtual void DeviceFree(void* p) = 0;
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_NCCL_API_H_
