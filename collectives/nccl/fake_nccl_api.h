// FakeNcclApi: NcclApi without NCCL or a GPU, for tests of the communicator's host-side logic.
// Buffers are host memory and the group has one member's data semantics (every collective
// copies send to recv, as NCCL does in a group of one). Tests script how long the init and
// each collective stay in progress (in AsyncState polls; -1: forever), inject an async error,
// and read back which calls were made. Thread model: thread-safe.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_API_H_
#define LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_API_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "collectives/nccl/nccl_api.h"

namespace lockstep::collectives::nccl {

class FakeNcclApi final : public NcclApi {
 public:
  // Polls of AsyncState that answer kInProgress after CommInitRank / after each enqueue.
  void set_init_polls(int polls);
  void set_op_polls(int polls);
  // The next AsyncState answers `error` (a peer's failure seen by NCCL).
  void InjectAsyncError(absl::Status error);

  int aborts() const;
  int destroys() const;
  // The unique ids CommInitRank was given, and the collectives enqueued ("all-reduce f16"),
  // with "group-start", "group-end" and "device N" (SetDevice) between them.
  std::vector<std::string> init_ids() const;
  std::vector<std::string> calls() const;
  // Blocks until a collective has been enqueued `n` times in all (tests signal after that).
  void WaitForCalls(size_t n) const;

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
  // Records a collective and copies `bytes` from send to recv.
  absl::Status Enqueue(const char* what, DType dtype, const void* send, void* recv, size_t bytes);

  mutable absl::Mutex mu_;
  int init_polls_ ABSL_GUARDED_BY(mu_) = 0;
  int op_polls_ ABSL_GUARDED_BY(mu_) = 0;
  int in_progress_ ABSL_GUARDED_BY(mu_) = 0;  // polls left; -1: forever
  absl::Status async_error_ ABSL_GUARDED_BY(mu_);
  int ids_ ABSL_GUARDED_BY(mu_) = 0;
  int aborts_ ABSL_GUARDED_BY(mu_) = 0;
  int destroys_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> init_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  int comms_[8] = {};  // their addresses are the fake communicator handles
  int next_comm_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_API_H_
