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
// Device tensors (a GPU replica's values in its memory; `gpu` is its device's handles):
// AllReduce and BatchAllReduce first check that every replica passes the same dtype and shape
// (one small all-reduce of a signature of both: NCCL would hang or corrupt memory on a
// mismatch; AllReduceAsync, the engine's cross_replica_sum inside a step, leaves that check
// out), then, over NcclAllReduce, all-reduce the device buffer in place (the
// copy AllReduce returns is made on the device; MEAN scales the sum by 1/num_replicas_in_sync
// on the device, f32 only, bitwise the host's division when the count is a power of two);
// over the host-side cross-device ops, stage it explicitly: a host copy all-reduced as host
// tensors are, copied back into the device tensor when Wait() returns.
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
#include "engine/gpu/gpu_device.h"
#include "engine/tensor.h"

namespace lockstep::distribute {

class ReplicaContext {
 public:
  ReplicaContext(int replica_id_in_sync_group, int local_replica_id, int num_replicas_in_sync,
                 engine::Device device, CrossDeviceOps* ops, absl::Duration timeout,
                 const engine::gpu::GpuDevice* gpu = nullptr)
      : replica_id_(replica_id_in_sync_group),
        local_id_(local_replica_id),
        num_in_sync_(num_replicas_in_sync),
        device_(device),
        ops_(ops),
        timeout_(timeout),
        gpu_(gpu) {}

  int replica_id_in_sync_group() const { return replica_id_; }
  // Index among this worker's replicas (the component of DistributedValues it owns).
  int local_replica_id() const { return local_id_; }
  int num_replicas_in_sync() const { return num_in_sync_; }
  const engine::Device& device() const { return device_; }

  // The reduction of `value` over every replica, as a new tensor on `value`'s side: host
  // values on the host, a device tensor on this replica's device. Errors as CrossDeviceOps
  // (DEADLINE_EXCEEDED after the strategy's timeout); for a device tensor INVALID_ARGUMENT
  // naming `value` when it lies on another device than this replica's, when the replicas
  // disagree on its dtype or shape, or for MEAN of a non-f32 one; FAILED_PRECONDITION without
  // the device's handles.
  absl::StatusOr<engine::Tensor> AllReduce(ReduceOp op, const engine::Tensor& value);
  // In place; *value must stay valid until Wait() returns. Errors as AllReduce, except that
  // replicas that disagree on a device tensor's dtype or shape are not told apart.
  std::unique_ptr<PendingAllReduce> AllReduceAsync(ReduceOp op, engine::Tensor* value);
  // For a step's gradients, fused per the strategy's bytes_per_pack (see GradientReducer).
  std::unique_ptr<GradientReducer> MakeGradientReducer(ReduceOp op);
  // Several tensors, started together and all waited for (device tensors checked as
  // AllReduce's).
  absl::Status BatchAllReduce(ReduceOp op, const std::vector<engine::Tensor*>& values);

 private:
  // INVALID_ARGUMENT for a device tensor on another device; FAILED_PRECONDITION without gpu_.
  absl::Status CheckDeviceValue(const char* what, const engine::Tensor& value) const;
  // INVALID_ARGUMENT naming `value` unless every replica passes its dtype and shape.
  absl::Status CheckReplicasAgree(const char* what, const engine::Tensor& value);
  // A device tensor in place: NCCL on the device, or staged through the host.
  std::unique_ptr<PendingAllReduce> DeviceAllReduceAsync(const char* what, ReduceOp op,
                                                         engine::Tensor* value,
                                                         bool check_agreement);

  const int replica_id_;
  const int local_id_;
  const int num_in_sync_;
  const engine::Device device_;
  CrossDeviceOps* const ops_;
  const absl::Duration timeout_;
  const engine::gpu::GpuDevice* const gpu_;  // this replica's device; null on a CPU
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_REPLICA_CONTEXT_H_
