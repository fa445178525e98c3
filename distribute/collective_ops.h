// CollectiveOps: CrossDeviceOps of kind kCollective. Every local replica owns one rank of a
// Communicator group (ring / halving-doubling from collectives/): an in-process group
// between the devices of one worker (Mirrored), or a TCP group of every replica of every
// worker (MultiWorkerMirrored, flat). A replica-context all-reduce is the Communicator's
// async all-reduce of that replica's tensor, so it overlaps whatever the replica does next.
//
// Ownership: owns the per-replica communicators; `cross_worker` (may be null) is not owned
// and serves CrossWorkerSum. Thread model: thread-safe; each local replica thread uses its
// own communicator; Abort() from any thread aborts them all.
#ifndef LOCKSTEP_DISTRIBUTE_COLLECTIVE_OPS_H_
#define LOCKSTEP_DISTRIBUTE_COLLECTIVE_OPS_H_

#include <memory>
#include <vector>

#include "collectives/fused_all_reduce.h"
#include "distribute/cross_device_ops.h"

namespace lockstep::distribute {

class CollectiveOps final : public CrossDeviceOps {
 public:
  // `replica_comms[i]` is local replica i's rank (its size is num_replicas_in_sync).
  // `compression` applies to the gradient packs (MakeGradientReducer) only; `codecs[i]`
  // (empty, or null entries: narrowing on the host) narrows and widens local replica i's
  // packs where its gradients are device memory (DeviceBf16Codec).
  CollectiveOps(std::vector<std::unique_ptr<collectives::CollectiveCommunicator>> replica_comms,
                int num_replicas_in_sync, collectives::CollectiveCommunicator* cross_worker,
                size_t bytes_per_pack,
                collectives::Compression compression = collectives::Compression::kNone,
                std::vector<std::unique_ptr<collectives::Bf16Codec>> codecs = {});

  CrossDeviceOpsKind kind() const override { return CrossDeviceOpsKind::kCollective; }
  std::unique_ptr<PendingAllReduce> AllReduceAsync(int local_replica, ReduceOp op,
                                                   engine::Tensor* value,
                                                   absl::Time deadline) override;
  // Fuses the step's gradients into packs of bytes_per_pack, each started when full, and
  // compressed as the constructor says.
  std::unique_ptr<GradientReducer> MakeGradientReducer(int local_replica, ReduceOp op,
                                                       absl::Time deadline) override;
  absl::Status CrossWorkerSum(const std::vector<engine::Tensor*>& values,
                              absl::Time deadline) override;
  void Abort() override;
  engine::BufferAllocator GradientAllocator(int local_replica) const override {
    return local_replica >= 0 && local_replica < static_cast<int>(comms_.size())
               ? HeapAllocator(comms_[local_replica]->heap())
               : nullptr;
  }
  AllReduceStats GradientAllReduceStats() const override {
    return StatsOf(comms_.empty() ? nullptr : comms_[0].get());
  }

 private:
  const std::vector<std::unique_ptr<collectives::CollectiveCommunicator>> comms_;
  const int num_in_sync_;
  collectives::CollectiveCommunicator* const cross_worker_;
  const size_t bytes_per_pack_;
  const collectives::Compression compression_;
  const std::vector<std::unique_ptr<collectives::Bf16Codec>> codecs_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_COLLECTIVE_OPS_H_
