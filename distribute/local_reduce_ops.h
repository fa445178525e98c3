// LocalReduceOps: CrossDeviceOps of kind kReduceToOneDevice. The local replicas' threads
// meet at a rendezvous; the last one to arrive sums every replica's tensor on the host in
// replica order (a fixed order: bitwise reproducible) into local replica 0's tensor (with
// one replica and one worker nothing is copied at all), runs the cross-worker all-reduce of
// that sum when there are several workers (hierarchical: one collective per worker), divides
// for MEAN, and writes the result back into every replica's tensor.
//
// Replica-context calls are matched by order: the k-th AllReduceAsync of every local
// replica form one all-reduce.
//
// Ownership: `cross_worker` (may be null: one worker) is not owned and must outlive this.
// Thread model: thread-safe; AllReduceAsync never blocks (the last arriver does the work on
// its own thread); Wait() blocks until the result is written, the deadline passes or
// Abort() is called.
#ifndef LOCKSTEP_DISTRIBUTE_LOCAL_REDUCE_OPS_H_
#define LOCKSTEP_DISTRIBUTE_LOCAL_REDUCE_OPS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "distribute/cross_device_ops.h"
#include "distribute/hierarchical_reducer.h"

namespace lockstep::distribute {

class LocalReduceOps final : public CrossDeviceOps {
 public:
  // `compression` applies to the cross-worker gradient packs (HierarchicalReducer) only.
  LocalReduceOps(int num_local_replicas, int num_replicas_in_sync,
                 collectives::CollectiveCommunicator* cross_worker, size_t bytes_per_pack,
                 collectives::Compression compression = collectives::Compression::kNone);

  CrossDeviceOpsKind kind() const override { return CrossDeviceOpsKind::kReduceToOneDevice; }
  std::unique_ptr<PendingAllReduce> AllReduceAsync(int local_replica, ReduceOp op,
                                                   engine::Tensor* value,
                                                   absl::Time deadline) override;
  // With several workers: a HierarchicalReducer step (local sums, fused cross-worker packs);
  // with one, the per-tensor default.
  std::unique_ptr<GradientReducer> MakeGradientReducer(int local_replica, ReduceOp op,
                                                       absl::Time deadline) override;
  absl::Status CrossWorkerSum(const std::vector<engine::Tensor*>& values,
                              absl::Time deadline) override;
  void Abort() override;
  // Local replica 0's gradients hold the local sums that go to the cross-worker all-reduce.
  engine::BufferAllocator GradientAllocator(int local_replica) const override {
    return local_replica == 0 && cross_worker_ != nullptr ? HeapAllocator(cross_worker_->heap())
                                                          : nullptr;
  }
  AllReduceStats GradientAllReduceStats() const override { return StatsOf(cross_worker_); }

 private:
  struct Slot {
    std::vector<engine::Tensor*> inputs;
    std::vector<ReduceOp> ops;
    int arrived = 0;
    int waited = 0;
    bool done = false;
    absl::Status status;
  };
  class Pending;

  // Sums, cross-worker reduces and writes back; called by the last arriver without mu_.
  absl::Status Combine(Slot* slot, absl::Time deadline);
  absl::Status Wait(int64_t seq, absl::Time deadline);

  const int num_local_;
  const int num_in_sync_;
  collectives::CollectiveCommunicator* const cross_worker_;
  const size_t bytes_per_pack_;
  const std::unique_ptr<HierarchicalReducer> hierarchical_;  // null with one worker

  absl::Mutex mu_;
  std::vector<int64_t> next_seq_ ABSL_GUARDED_BY(mu_);  // per local replica
  std::map<int64_t, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // sticky first error
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_LOCAL_REDUCE_OPS_H_
