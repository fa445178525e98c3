// HierarchicalReducer: the gradient path of LocalReduceOps when there are several workers.
// During the backward pass each gradient is summed over the local replicas as soon as the
// last of them has produced it (host memory, replica order), and that local sum joins a
// collectives::FusedAllReduce across workers, whose packs (bytes_per_pack) start on the
// communicator's thread as they fill: the cross-worker traffic overlaps the rest of the
// backward pass and is fused. Finish() waits for every pack and writes the result (divided
// for MEAN) back into every local replica's gradient.
//
// Ordering: the cross-worker Adds happen in gradient order on every worker because the
// replica that completes gradient k+1 can only do so after its own Add of k returned.
// Ownership: shared by the local replicas (owned by LocalReduceOps); the communicator is
// borrowed. Thread model: thread-safe; Add/Finish from the replica threads, one step at a
// time per replica, every replica adding the same gradients in the same order.
#ifndef LOCKSTEP_DISTRIBUTE_HIERARCHICAL_REDUCER_H_
#define LOCKSTEP_DISTRIBUTE_HIERARCHICAL_REDUCER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/collective_communicator.h"
#include "collectives/fused_all_reduce.h"
#include "distribute/distributed_values.h"
#include "engine/tensor.h"

namespace lockstep::distribute {

class HierarchicalReducer {
 public:
  // `compression`: how the local sums travel across workers (collectives::FusedAllReduce).
  HierarchicalReducer(int num_local_replicas, int num_replicas_in_sync,
                      collectives::CollectiveCommunicator* cross_worker, size_t bytes_per_pack,
                      collectives::Compression compression = collectives::Compression::kNone);

  // `deadline` bounds the cross-worker pack the gradient joins. `value` is the replica's own
  // buffer (nothing else may alias it) until Finish: local replica 0's becomes the sum, and
  // the cross-worker all-reduce runs in it in place.
  void Add(int local_replica, ReduceOp op, engine::Tensor* value, absl::Time deadline);
  absl::Status Finish(int local_replica, absl::Time deadline);
  void Abort();

 private:
  struct Step {
    std::vector<std::vector<engine::Tensor*>> inputs;  // [gradient][replica]
    std::vector<int> arrived;                          // per gradient
    std::vector<engine::Tensor> sums;                  // per gradient, once complete
    std::vector<int> next;                             // per replica: its next gradient
    ReduceOp op = ReduceOp::kSum;
    std::unique_ptr<collectives::FusedAllReduce> fused;
    absl::Status status;
    int finished = 0;
    int waited = 0;
    bool done = false;
  };
  std::shared_ptr<Step> CurrentStep(int local_replica) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The last replica to finish: waits for the packs and writes back.
  absl::Status Complete(Step* step);

  const int num_local_;
  const int num_in_sync_;
  collectives::CollectiveCommunicator* const comm_;
  const size_t bytes_per_pack_;
  const collectives::Compression compression_;

  absl::Mutex mu_;
  std::vector<int64_t> step_of_ ABSL_GUARDED_BY(mu_);  // per replica
  std::map<int64_t, std::shared_ptr<Step>> steps_ ABSL_GUARDED_BY(mu_);
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_HIERARCHICAL_REDUCER_H_
