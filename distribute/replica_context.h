// ReplicaContext: what a replica function sees while Strategy::Run calls it on one replica
// (tf.distribute.ReplicaContext): its id in the sync group, the group's size, its device,
// and all-reduces with the other replicas.
//
// MakeGradientReducer (or AllReduceAsync) is for the training executor: Add each gradient
// from the engine's StepOptions::on_gradient_ready hook as it becomes final, so the
// all-reduce of the last layers' gradients overlaps the backward pass of the first; then
// Finish() (Wait()) before the optimizer applies them. Every replica must issue the same
// all-reduces (dtype, shape, op) in the same order.
//
// Ownership: made by the strategy for the duration of one replica's call; the
// CrossDeviceOps is the strategy's. Thread model: used by its replica's thread only.
#ifndef LOCKSTEP_DISTRIBUTE_REPLICA_CONTEXT_H_
#define LOCKSTEP_DISTRIBUTE_REPLICA_CONTEXT_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "distribute/cross_device_ops.h"
#include "distribute/distributed_values.h"
#include "engine/device.h"
#include "engine/tensor.h"

namespace lockstep::distribute {

class ReplicaContext {
 public:
  ReplicaContext(int replica_id_in_sync_group, int local_replica_id, int num_replicas_in_sync,
                 engine::Device device, CrossDeviceOps* ops, absl::Duration timeout)
      : replica_id_(replica_id_in_sync_group),
        local_id_(local_replica_id),
        num_in_sync_(num_replicas_in_sync),
        device_(device),
        ops_(ops),
        timeout_(timeout) {}

  int replica_id_in_sync_group() const { return replica_id_; }
  // Index among this worker's replicas (the component of DistributedValues it owns).
  int local_replica_id() const { return local_id_; }
  int num_replicas_in_sync() const { return num_in_sync_; }
  const engine::Device& device() const { return device_; }

  // The reduction of `value` over every replica, as a new tensor on this replica's device.
  // Errors as CrossDeviceOps (DEADLINE_EXCEEDED after the strategy's timeout).
  absl::StatusOr<engine::Tensor> AllReduce(ReduceOp op, const engine::Tensor& value);
  // In place; *value must stay valid until Wait() returns.
  std::unique_ptr<PendingAllReduce> AllReduceAsync(ReduceOp op, engine::Tensor* value);
  // For a step's gradients, fused per the strategy's bytes_per_pack (see GradientReducer).
  std::unique_ptr<GradientReducer> MakeGradientReducer(ReduceOp op);
  // Several tensors, started together and all waited for.
  absl::Status BatchAllReduce(ReduceOp op, const std::vector<engine::Tensor*>& values);

 private:
  const int replica_id_;
  const int local_id_;
  const int num_in_sync_;
  const engine::Device device_;
  CrossDeviceOps* const ops_;
  const absl::Duration timeout_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_REPLICA_CONTEXT_H_
