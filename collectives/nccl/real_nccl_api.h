// RealNcclApi: NcclApi over libnccl.so.2, opened at run time (common/cuda/shared_library.h),
// so that a --config=cuda binary starts where NCCL is not installed and says what is missing
// only when NCCL is asked for. The one place where ncclResult_t becomes absl::Status.
// Built only under --config=cuda. Owns the library handle; thread-safe (NCCL's own rules
// apply to each communicator).
#ifndef LOCKSTEP_COLLECTIVES_NCCL_REAL_NCCL_API_H_
#define LOCKSTEP_COLLECTIVES_NCCL_REAL_NCCL_API_H_

#include <nccl.h>

#include <memory>

#include "collectives/nccl/nccl_api.h"
#include "common/cuda/shared_library.h"

namespace lockstep::collectives::nccl {

// OK for ncclSuccess and ncclInProgress (a non-blocking call goes on; AsyncState follows
// it); UNAVAILABLE for ncclRemoteError and ncclSystemError (a peer or the network failed),
// INVALID_ARGUMENT for ncclInvalidArgument and ncclInvalidUsage, INTERNAL otherwise. The
// message: "<what>: <ncclGetErrorString>[: <last error>]".
absl::Status NcclStatus(ncclResult_t result, absl::string_view what, absl::string_view error_string,
                        absl::string_view last_error);

class RealNcclApi final : public NcclApi {
 public:
  // NOT_FOUND naming libnccl.so.2 and LD_LIBRARY_PATH when it cannot be loaded, or naming the
  // missing symbol when it is older than NCCL 2.14 (non-blocking communicators).
  static absl::StatusOr<std::unique_ptr<RealNcclApi>> Load();

  absl::StatusOr<std::string> GetUniqueId() override;
  absl::StatusOr<NcclComm> CommInitRank(int nranks, absl::string_view unique_id, int rank) override;
  absl::StatusOr<NcclProgress> AsyncState(NcclComm comm) override;
  absl::Status CommAbort(NcclComm comm) override;
  absl::Status CommDestroy(NcclComm comm) override;
  absl::Status AllReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                         NcclComm comm, DeviceStream stream) override;
  absl::Status Broadcast(const void* send, void* recv, size_t count, DType dtype, int root,
                         NcclComm comm, DeviceStream stream) override;
  absl::Status AllGather(const void* send, void* recv, size_t count, DType dtype, NcclComm comm,
                         DeviceStream stream) override;
  absl::Status ReduceScatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                             NcclComm comm, DeviceStream stream) override;
  absl::Status GroupStart() override;
  absl::Status GroupEnd() override;
  absl::Status SetDevice(int device) override;
  absl::StatusOr<NcclProgress> StreamState(DeviceStream stream) override;
  absl::StatusOr<void*> DeviceAlloc(size_t bytes) override;
  void DeviceFree(void* p) override;

 private:
  // The NCCL entry points, resolved once by Load.
  struct Functions {
    decltype(&ncclGetUniqueId) get_unique_id;
    decltype(&ncclCommInitRankConfig) comm_init_rank_config;
    decltype(&ncclCommGetAsyncError) comm_get_async_error;
    decltype(&ncclCommAbort) comm_abort;
    decltype(&ncclCommDestroy) comm_destroy;
    decltype(&ncclAllReduce) all_reduce;
    decltype(&ncclBroadcast) broadcast;
    decltype(&ncclAllGather) all_gather;
    decltype(&ncclReduceScatter) reduce_scatter;
    decltype(&ncclGroupStart) group_start;
    decltype(&ncclGroupEnd) group_end;
    decltype(&ncclGetErrorString) get_error_string;
    decltype(&ncclGetLastError) get_last_error;
  };
  RealNcclApi(std::unique_ptr<SharedLibrary> library, Functions f)
      : library_(std::move(library)), f_(f) {}
  absl::Status Check(ncclResult_t result, absl::string_view what, NcclComm comm) const;

  const std::unique_ptr<SharedLibrary> library_;
  const Functions f_;
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_REAL_NCCL_API_H_
