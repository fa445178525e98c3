// NcclLocalGroup: the GPUs of one worker as ranks of one NCCL group, one NcclCommunicator
// (and one NCCL rank) per GPU, created and driven from one thread with group calls
// (ncclGroupStart/End), which NCCL requires when one thread drives several GPUs: without
// them the first GPU's call would wait for the second, which is never issued.
//
//   Create: one unique id exchange for the worker (the rank 0 publishes it when it is here),
//           then every GPU's ncclCommInitRankConfig in one group, then each init is awaited.
//   AllReduce / Broadcast: every GPU's call in one group, then each is awaited (deadline,
//           async error, AbortSignal, as NcclCommunicator). When one GPU's communicator
//           fails, every other one is aborted with the same error: a group whose members
//           disagree would hang.
// The per-GPU communicators (at()) also run collectives of their own.
//
// Owns the communicators. Thread model: one group call at a time; Abort() and the
// AbortSignal from any thread.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_NCCL_LOCAL_GROUP_H_
#define LOCKSTEP_COLLECTIVES_NCCL_NCCL_LOCAL_GROUP_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "collectives/nccl/nccl_communicator.h"

namespace lockstep::collectives::nccl {

// One GPU of this worker: its rank in the whole group, CUDA device and dedicated stream.
struct LocalGpu {
  int rank = 0;
  int device = 0;
  DeviceStream stream = nullptr;
};

class NcclLocalGroup {
 public:
  // `common`: everything but rank, device and stream, which come from `gpus` (at least one,
  // distinct ranks). Errors as NcclCommunicator::Create, naming the rank.
  static absl::StatusOr<std::unique_ptr<NcclLocalGroup>> Create(NcclCommunicatorOptions common,
                                                                std::vector<LocalGpu> gpus);

  size_t local_size() const { return comms_.size(); }
  NcclCommunicator& at(size_t i) { return *comms_[i]; }

  // One buffer per local GPU, in `gpus` order; the other arguments as NcclCommunicator's.
  absl::Status AllReduce(absl::Span<const void* const> send, absl::Span<void* const> recv,
                         size_t count, DType dtype, ReduceOp op, absl::Time deadline);
  absl::Status Broadcast(absl::Span<void* const> bufs, size_t count, DType dtype, int root,
                         absl::Time deadline);

  // Aborts every local communicator.
  void Abort();

 private:
  explicit NcclLocalGroup(std::vector<std::unique_ptr<NcclCommunicator>> comms)
      : comms_(std::move(comms)) {}
  // Fails (and aborts) every local communicator with `status`, which it returns.
  absl::Status FailAll(absl::Status status);
  // Issues `enqueue(i, comm)` for every GPU i inside one group, then waits for each.
  absl::Status RunGroup(const char* what, absl::Time deadline,
                        const std::function<absl::Status(size_t, NcclComm)>& enqueue);

  absl::Mutex mu_;  // one group call at a time
  const std::vector<std::unique_ptr<NcclCommunicator>> comms_;
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_NCCL_LOCAL_GROUP_H_
