#include "collectives/nccl/real_nccl_api.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "collectives/nccl/nccl_codes.h"
#include "common/cuda/cuda_status.h"

namespace lockstep::collectives::nccl {
namespace {

// nccl_codes.h's numbers are nccl.h's (nccl_codes_test checks which DType gets which).
static_assert(static_cast<int>(NcclDataType::kInt32) == ncclInt32);
static_assert(static_cast<int>(NcclDataType::kInt64) == ncclInt64);
static_assert(static_cast<int>(NcclDataType::kFloat16) == ncclFloat16);
static_assert(static_cast<int>(NcclDataType::kFloat32) == ncclFloat32);
static_assert(static_cast<int>(NcclDataType::kFloat64) == ncclFloat64);
static_assert(static_cast<int>(NcclDataType::kBfloat16) == ncclBfloat16);
static_assert(static_cast<int>(NcclRedOp::kSum) == ncclSum);
static_assert(static_cast<int>(NcclRedOp::kProd) == ncclProd);
static_assert(static_cast<int>(NcclRedOp::kMax) == ncclMax);
static_assert(static_cast<int>(NcclRedOp::kMin) == ncclMin);
static_assert(static_cast<int>(NcclRedOp::kAvg) == ncclAvg);

ncclDataType_t NcclType(DType dtype) { return static_cast<ncclDataType_t>(NcclDataTypeOf(dtype)); }

ncclRedOp_t NcclOp(ReduceOp op) { return static_cast<ncclRedOp_t>(NcclRedOpOf(op)); }

ncclComm_t Comm(NcclComm comm) { return static_cast<ncclComm_t>(comm); }
cudaStream_t Stream(DeviceStream stream) { return static_cast<cudaStream_t>(stream); }

template <typename F>
absl::Status Resolve(const SharedLibrary& lib, const char* symbol, F* out) {
  absl::StatusOr<void*> p = lib.Symbol(symbol);
  if (!p.ok()) return p.status();
  *out = reinterpret_cast<F>(*p);
  return absl::OkStatus();
}

}  // namespace

absl::Status NcclStatus(ncclResult_t result, absl::string_view what, absl::string_view error_string,
                        absl::string_view last_error) {
  if (result == ncclSuccess || result == ncclInProgress) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": ", error_string);
  if (!last_error.empty()) absl::StrAppend(&message, ": ", last_error);
  switch (result) {
    case ncclRemoteError:
    case ncclSystemError:
      return absl::UnavailableError(message);
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<std::unique_ptr<RealNcclApi>> RealNcclApi::Load() {
  absl::StatusOr<std::unique_ptr<SharedLibrary>> lib =
      SharedLibrary::Open(kNcclLibrary, "NCCL collectives (communication.implementation NCCL)");
  if (!lib.ok()) return lib.status();
  const SharedLibrary& l = **lib;
  Functions f{};
  for (absl::Status s : {
           Resolve(l, "ncclGetUniqueId", &f.get_unique_id),
           Resolve(l, "ncclCommInitRankConfig", &f.comm_init_rank_config),
           Resolve(l, "ncclCommGetAsyncError", &f.comm_get_async_error),
           Resolve(l, "ncclCommAbort", &f.comm_abort),
           Resolve(l, "ncclCommDestroy", &f.comm_destroy),
           Resolve(l, "ncclAllReduce", &f.all_reduce),
           Resolve(l, "ncclBroadcast", &f.broadcast),
           Resolve(l, "ncclAllGather", &f.all_gather),
           Resolve(l, "ncclReduceScatter", &f.reduce_scatter),
           Resolve(l, "ncclGroupStart", &f.group_start),
           Resolve(l, "ncclGroupEnd", &f.group_end),
           Resolve(l, "ncclGetErrorString", &f.get_error_string),
           Resolve(l, "ncclGetLastError", &f.get_last_error),
       }) {
    if (!s.ok()) return s;
  }
  return std::unique_ptr<RealNcclApi>(new RealNcclApi(*std::move(lib), f));
}

absl::Status RealNcclApi::Check(ncclResult_t result, absl::string_view what, NcclComm comm) const {
  if (result == ncclSuccess || result == ncclInProgress) return absl::OkStatus();
  const char* last = f_.get_last_error(Comm(comm));
  return NcclStatus(result, what, f_.get_error_string(result), last != nullptr ? last : "");
}

absl::StatusOr<std::string> RealNcclApi::GetUniqueId() {
  ncclUniqueId id;
  if (absl::Status s = Check(f_.get_unique_id(&id), "ncclGetUniqueId", nullptr); !s.ok()) {
    return s;
  }
  static_assert(sizeof(id.internal) == kNcclUniqueIdBytes);
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<NcclComm> RealNcclApi::CommInitRank(int nranks, absl::string_view unique_id,
                                                   int rank) {
  if (unique_id.size() != kNcclUniqueIdBytes) {
    return absl::InvalidArgumentError("ncclCommInitRankConfig: the unique id has the wrong size");
  }
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), kNcclUniqueIdBytes);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // never hang: init and collectives are polled (nccl_communicator.h)
  ncclComm_t comm = nullptr;
  if (absl::Status s = Check(f_.comm_init_rank_config(&comm, nranks, id, rank, &config),
                             "ncclCommInitRankConfig", nullptr);
      !s.ok()) {
    if (comm != nullptr) f_.comm_abort(comm);
    return s;
  }
  return static_cast<NcclComm>(comm);
}

absl::StatusOr<NcclProgress> RealNcclApi::AsyncState(NcclComm comm) {
  ncclResult_t state = ncclSuccess;
  if (absl::Status s =
          Check(f_.comm_get_async_error(Comm(comm), &state), "ncclCommGetAsyncError", comm);
      !s.ok()) {
    return s;
  }
  if (state == ncclInProgress) return NcclProgress::kInProgress;
  if (absl::Status s = Check(state, "NCCL", comm); !s.ok()) return s;
  return NcclProgress::kDone;
}

absl::Status RealNcclApi::CommAbort(NcclComm comm) {
  return Check(f_.comm_abort(Comm(comm)), "ncclCommAbort", nullptr);
}

absl::Status RealNcclApi::CommDestroy(NcclComm comm) {
  return Check(f_.comm_destroy(Comm(comm)), "ncclCommDestroy", nullptr);
}

absl::Status RealNcclApi::AllReduce(const void* send, void* recv, size_t count, DType dtype,
                                    ReduceOp op, NcclComm comm, DeviceStream stream) {
  return Check(
      f_.all_reduce(send, recv, count, NcclType(dtype), NcclOp(op), Comm(comm), Stream(stream)),
      "ncclAllReduce", comm);
}

absl::Status RealNcclApi::Broadcast(const void* send, void* recv, size_t count, DType dtype,
                                    int root, NcclComm comm, DeviceStream stream) {
  return Check(f_.broadcast(send, recv, count, NcclType(dtype), root, Comm(comm), Stream(stream)),
               "ncclBroadcast", comm);
}

absl::Status RealNcclApi::AllGather(const void* send, void* recv, size_t count, DType dtype,
                                    NcclComm comm, DeviceStream stream) {
  return Check(f_.all_gather(send, recv, count, NcclType(dtype), Comm(comm), Stream(stream)),
               "ncclAllGather", comm);
}

absl::Status RealNcclApi::ReduceScatter(const void* send, void* recv, size_t count, DType dtype,
                                        ReduceOp op, NcclComm comm, DeviceStream stream) {
  return Check(
      f_.reduce_scatter(send, recv, count, NcclType(dtype), NcclOp(op), Comm(comm), Stream(stream)),
      "ncclReduceScatter", comm);
}

absl::Status RealNcclApi::GroupStart() {
  return Check(f_.group_start(), "ncclGroupStart", nullptr);
}

absl::Status RealNcclApi::GroupEnd() { return Check(f_.group_end(), "ncclGroupEnd", nullptr); }

absl::Status RealNcclApi::SetDevice(int device) {
  return CudaStatus(cudaSetDevice(device), absl::StrCat("cudaSetDevice(", device, ")"));
}

absl::StatusOr<NcclProgress> RealNcclApi::StreamState(DeviceStream stream) {
  const cudaError_t e = cudaStreamQuery(Stream(stream));
  if (e == cudaErrorNotReady) return NcclProgress::kInProgress;
  if (absl::Status s = CudaStatus(e, "cudaStreamQuery"); !s.ok()) return s;
  return NcclProgress::kDone;
}

absl::StatusOr<void*> RealNcclApi::DeviceAlloc(size_t bytes) {
  void* p = nullptr;
  if (absl::Status s = CudaStatus(cudaMalloc(&p, bytes), "cudaMalloc"); !s.ok()) return s;
  if (absl::Status s = CudaStatus(cudaMemset(p, 0, bytes), "cudaMemset"); !s.ok()) {
    cudaFree(p);
    return s;
  }
  return p;
}

void RealNcclApi::DeviceFree(void* p) { cudaFree(p); }

}  // namespace lockstep::collectives::nccl
