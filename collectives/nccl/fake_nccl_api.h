// FakeNcclApi: NcclApi without NCCL or a GPU, for tests of the communicator's host-side logic.
// One FakeNcclApi stands for one process's NCCL: several ranks in threads of a test each get
// their own, over one FakeNcclWorld (fake_nccl_world.h), where the ranks' collectives meet
// and really compute (sum, prod, min, max, avg across the ranks, broadcast from the root,
// all-gather, reduce-scatter). Without a world it makes a private one: its groups are then
// made of the ranks this api inits (a group of one computes as NCCL does: a copy).
// Buffers are host memory, or a FakeCudaApi's device memory when the world uses it
// (FakeNcclWorld::UseDeviceMemory): a collective then first runs the work enqueued before it
// on its stream (the fake's lazy streams run nothing until synchronised), which is NCCL's
// stream order: it reads what the kernels before it wrote.
//
// As NCCL: collectives issued between GroupStart and GroupEnd by one thread reach the group
// at GroupEnd; a root outside the group or a null buffer is refused at the call
// (INVALID_ARGUMENT); ranks that disagree on a collective (count, dtype, op, root) fail
// their group with INVALID_ARGUMENT; CommAbort of one rank fails the other ranks' pending
// and later collectives (UNAVAILABLE naming it).
// Tests also script how long the init and each collective stay in progress after they are
// complete (in AsyncState polls; -1: forever), inject an async error, and read back every
// call with its arguments (calls()). Thread model: thread-safe.
#ifndef LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_API_H_
#define LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_API_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/nccl/fake_nccl_world.h"
#include "collectives/nccl/nccl_api.h"

namespace lockstep::collectives::nccl {

class FakeNcclApi final : public NcclApi {
 public:
  // `world`: shared with the other ranks' FakeNcclApi, not owned; null: a private one.
  explicit FakeNcclApi(FakeNcclWorld* world = nullptr);

  // Polls of AsyncState that answer kInProgress once the init / each collective is complete.
  void set_init_polls(int polls);
  void set_op_polls(int polls);
  // Every later AsyncState answers `error` (an error NCCL saw on this rank).
  void InjectAsyncError(absl::Status error);

  int aborts() const;
  int destroys() const;
  // The unique ids CommInitRank was given, and every call in order: collectives with their
  // arguments and the caller's rank ("all-reduce f32 sum count 3 rank 1 of 4", "broadcast
  // f32 root 3 count 2 rank 0 of 4", refused ones too), "group-start", "group-end" and
  // "device N" (SetDevice).
  std::vector<std::string> init_ids() const;
  std::vector<std::string> calls() const;
  // The stream each collective (refused ones too) was enqueued on, in call order.
  std::vector<DeviceStream> collective_streams() const;
  // Blocks until `n` calls have been made in all (tests signal after that), or `deadline`;
  // false at the deadline.
  bool WaitForCalls(size_t n, absl::Time deadline = absl::InfiniteFuture()) const;

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
  // A thread's open group: its depth and the collectives it holds until GroupEnd.
  struct OpenGroup {
    int depth = 0;
    std::vector<std::pair<NcclComm, FakeNcclCall>> held;
  };

  // Records `call`, checks it, and issues it to the world (or holds it in the open group).
  absl::Status Enqueue(NcclComm comm, const FakeNcclCall& call, DeviceStream stream);
  // When `buffer` is a fake's device memory: runs what was enqueued on `stream` (a stream of
  // that fake) before a collective on it.
  absl::Status RunStreamBefore(const void* buffer, DeviceStream stream);

  std::unique_ptr<FakeNcclWorld> own_world_;  // when none was given
  FakeNcclWorld* const world_;
  mutable absl::Mutex mu_;
  int init_polls_ ABSL_GUARDED_BY(mu_) = 0;
  int op_polls_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<NcclComm, int> polls_left_ ABSL_GUARDED_BY(mu_);  // per communicator; -1: forever
  absl::Status async_error_ ABSL_GUARDED_BY(mu_);
  int aborts_ ABSL_GUARDED_BY(mu_) = 0;
  int destroys_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> init_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<DeviceStream> collective_streams_ ABSL_GUARDED_BY(mu_);
  std::map<std::thread::id, OpenGroup> groups_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::collectives::nccl

#endif  // LOCKSTEP_COLLECTIVES_NCCL_FAKE_NCCL_API_H_
