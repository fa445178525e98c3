// CrossDeviceOps: how a strategy combines the values of its replicas (tf.distribute's
// CrossDeviceOps). Two kinds, chosen per strategy (see CrossDeviceOpsKind):
//
//   kReduceToOneDevice  the local replicas' tensors are summed on the host in replica order
//                       (LocalReduceOps); with several workers the local sum then goes
//                       through one cross-worker all-reduce (hierarchical: local first,
//                       then across workers; one collective per worker, not per replica).
//   kCollective         every replica is a rank of a Communicator group (ring or
//                       halving-doubling from collectives/): in-process between local
//                       devices, TCP between workers (flat).
//   kNcclAllReduce      GPU replicas: every replica is a rank of an NCCL group
//                       (NcclAllReduce, nccl_all_reduce.h), the default on GPUs.
//
// A strategy uses them in two places:
//   - replica context (ReplicaContext::AllReduce, one call per local replica thread, in the
//     same order on every replica): AllReduceAsync, which returns at once so a replica can
//     start all-reducing a gradient while its backward pass goes on;
//   - cross-replica context (Strategy::Reduce, StrategyExtended::BatchReduceTo, on the
//     caller's thread after the local values are summed): CrossWorkerSum, which all-reduces
//     across workers with fusion (tensors packed into buckets of `bytes_per_pack`).
//
// Errors: DEADLINE_EXCEEDED (a replica or worker is late), ABORTED after Abort(),
// UNAVAILABLE (a peer was lost), INVALID_ARGUMENT (replicas disagree on dtype or shape).
// After an error the ops are failed, like a Communicator: the strategy must be rebuilt.
// Thread model: thread-safe; Abort() from any thread ends every pending call.
#ifndef LOCKSTEP_DISTRIBUTE_CROSS_DEVICE_OPS_H_
#define LOCKSTEP_DISTRIBUTE_CROSS_DEVICE_OPS_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "collectives/collective_communicator.h"
#include "distribute/distributed_values.h"
#include "engine/tensor.h"

namespace lockstep::distribute {

enum class CrossDeviceOpsKind { kReduceToOneDevice, kCollective, kNcclAllReduce };
const char* CrossDeviceOpsKindName(CrossDeviceOpsKind kind);

// The result of a replica-context all-reduce. The tensor handed in must stay valid and
// untouched until Wait() returns; it then holds the result.
class PendingAllReduce {
 public:
  virtual ~PendingAllReduce() = default;
  virtual absl::Status Wait() = 0;
};

// Reduces one replica's gradients of one step as the backward pass produces them: Add()
// each from StepOptions::on_gradient_ready, in the order every replica agrees on, then
// Finish() before applying them. Kinds may fuse tensors into packs of bytes_per_pack.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // *value must stay valid until Finish() returns; it then holds the result.
  virtual void Add(engine::Tensor* value) = 0;
  // Waits for everything added; the first error.
  virtual absl::Status Finish() = 0;
};

class CrossDeviceOps {
 public:
  virtual ~CrossDeviceOps() = default;
  virtual CrossDeviceOpsKind kind() const = 0;

  // Replica context: local replica `local_replica` contributes *value; after Wait() every
  // replica's *value holds the SUM (or MEAN over num_replicas_in_sync) over all replicas of
  // all workers.
  virtual std::unique_ptr<PendingAllReduce> AllReduceAsync(int local_replica, ReduceOp op,
                                                           engine::Tensor* value,
                                                           absl::Time deadline) = 0;

  // Replica context, for a step's gradients. The default all-reduces each tensor on its
  // own (AllReduceAsync); CollectiveOps packs them (collectives::FusedAllReduce).
  virtual std::unique_ptr<GradientReducer> MakeGradientReducer(int local_replica, ReduceOp op,
                                                               absl::Time deadline);

  // Cross-replica context: sums each tensor across workers in place (a no-op with one
  // worker). Every worker calls it with the same dtypes and shapes in the same order.
  virtual absl::Status CrossWorkerSum(const std::vector<engine::Tensor*>& values,
                                      absl::Time deadline) = 0;

  virtual void Abort() = 0;
  // The coordinator reports worker `rank` lost (`reason` says how): the pending and
  // later calls fail. The default aborts (the CPU transports name the lost peer themselves);
  // NcclAllReduce makes them fail with UNAVAILABLE naming `rank`.
  virtual void PeerLost(int rank, const std::string& reason) { Abort(); }

  // Where local replica `local_replica`'s gradients should live so that they are
  // all-reduced in place (the communicator's zero-copy heap, see collectives' transport.h),
  // or null when that gains nothing.
  virtual engine::BufferAllocator GradientAllocator(int local_replica) const { return nullptr; }

  // The group that carries this worker's gradients (the cross-worker communicator, or local
  // replica 0's rank of a flat group) and what its async all-reduces moved so far (the fused
  // gradient packs, and CrossWorkerSum's loss and metrics where they share the group;
  // collectives::CollectiveCommunicator::async_all_reduce_totals): for the bus
  // bandwidth a worker reports. A group of 1 when there is none.
  struct AllReduceStats {
    int group_size = 1;
    collectives::CollectiveCommunicator::AllReduceTotals totals;
  };
  virtual AllReduceStats GradientAllReduceStats() const { return {}; }
};

// The stats of `comm` (may be null: a group of 1).
CrossDeviceOps::AllReduceStats StatsOf(const collectives::CollectiveCommunicator* comm);

// Buffers from `heap` (null when it is null or full), returned to it when released. The
// heap lives while any buffer does.
engine::BufferAllocator HeapAllocator(std::shared_ptr<collectives::TransportHeap> heap);

// All-reduces (SUM) `values` over `comm` through collectives::FusedAllReduce: tensors of
// one dtype are packed into buckets of `bytes_per_pack` bytes (0: the collectives' default,
// 4 MiB), one collective per bucket instead of one per tensor.
absl::Status FusedAllReduceSum(collectives::CollectiveCommunicator* comm,
                               const std::vector<engine::Tensor*>& values, size_t bytes_per_pack,
                               absl::Time deadline);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_CROSS_DEVICE_OPS_H_
