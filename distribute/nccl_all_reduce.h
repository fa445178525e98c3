// NcclAllReduce: CrossDeviceOps over NCCL (tf.distribute.NcclAllReduce), the default for
// Mirrored and MultiWorkerMirrored on GPU replicas (communication.implementation AUTO or NCCL:
// communication_backend.h). Every local GPU replica owns one rank of an NCCL group
// (collectives::nccl::NcclCommunicator through the CollectiveCommunicator interface, as
// CollectiveOps' in-process and TCP groups): ranks first_rank .. first_rank + n - 1 of a
// group of num_replicas_in_sync, the unique id exchanged through `store`. Gradient packs are
// fused per bytes_per_pack (collectives::FusedAllReduce: one NCCL group per pack) and run on
// each communicator's own thread and stream, overlapping the replica's backward pass.
// communication.compression BF16 narrows each pack's f32 gradients to bf16 device scratch,
// all-reduces it as ncclBfloat16 and widens the result back, all on the device's compute
// stream (DeviceBf16Codec, device_bf16_codec.h).
//
// Failure: Abort() aborts every local communicator; PeerLost(rank, reason) (the
// coordinator's notice that a peer is gone) goes to the attempt's AbortSignal, so the pending
// and later collectives of every local replica end at once with UNAVAILABLE naming that rank
// (collectives/transport/peer_failure.h: FailedRank), and NCCL's abort fails the other ranks.
//
// Ownership: owns its communicators; borrows the NcclApi (NcclEnvironment) and
// `cross_worker`. Thread model: as CrossDeviceOps.
#ifndef LOCKSTEP_DISTRIBUTE_NCCL_ALL_REDUCE_H_
#define LOCKSTEP_DISTRIBUTE_NCCL_ALL_REDUCE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/nccl/abort_signal.h"
#include "collectives/nccl/nccl_api.h"
#include "collectives/store.h"
#include "common/clock.h"
#include "distribute/collective_ops.h"
#include "distribute/cross_device_ops.h"
#include "distribute/gpu_devices.h"
#include "distribute/strategy.h"
#include "engine/device.h"

namespace lockstep::distribute {

// What a worker gives its strategies so that GPU replicas can use NCCL.
struct NcclEnvironment {
  // NCCL (RealNcclApi, loaded by the worker in a CUDA build; FakeNcclApi in tests), not
  // owned. Null: NCCL is not available to this worker.
  collectives::nccl::NcclApi* api = nullptr;
  // The stream GPU `index`'s communicator enqueues on (the engine's device context); unset
  // or null: the GPU's default stream.
  std::function<collectives::nccl::DeviceStream(int index)> stream;
  // The attempt's; where the coordinator's peer-loss notice lands. Null: a private one.
  std::shared_ptr<collectives::nccl::AbortSignal> signal;
  Clock* clock = nullptr;  // null: the real clock
};

// Whether NCCL can carry this worker's GPU replicas, as ResolveBackend's built_with_cuda: a
// --config=cuda build, or an NcclApi given (the tests' fake stands for one).
bool HasNccl(const NcclEnvironment& env);

struct NcclAllReduceOptions {
  NcclEnvironment env;
  std::vector<engine::Device> devices;  // the local GPU replicas, in order
  // Their engine devices (may be null): without env.stream, each communicator enqueues on its
  // device's compute stream, so a gradient is reduced after the kernels that wrote it.
  std::shared_ptr<GpuDeviceSet> gpus;
  int first_rank = 0;            // of the local replica 0 in the group
  int num_replicas_in_sync = 1;  // the group's size
  // Rendezvous of the unique id (not owned; used by Create only) under `key`; null: a
  // private in-memory one (every rank is local).
  collectives::Store* store = nullptr;
  std::string key = "nccl";
  collectives::CollectiveCommunicator* cross_worker = nullptr;  // CrossWorkerSum; not owned
  CommunicationOptions communication;                           // timeout, packs, compression
};

class NcclAllReduce final : public CrossDeviceOps {
 public:
  // INVALID_ARGUMENT without an api, for a device that is not a GPU, or for BF16 compression
  // of device gradients with env.stream set; otherwise the NCCL
  // init's errors (NcclCommunicator::Create) of the first local replica that failed, naming
  // its rank.
  static absl::StatusOr<std::unique_ptr<NcclAllReduce>> Create(const NcclAllReduceOptions& options);

  CrossDeviceOpsKind kind() const override { return CrossDeviceOpsKind::kNcclAllReduce; }
  std::unique_ptr<PendingAllReduce> AllReduceAsync(int local_replica, ReduceOp op,
                                                   engine::Tensor* value,
                                                   absl::Time deadline) override {
    return ops_->AllReduceAsync(local_replica, op, value, deadline);
  }
  std::unique_ptr<GradientReducer> MakeGradientReducer(int local_replica, ReduceOp op,
                                                       absl::Time deadline) override {
    return ops_->MakeGradientReducer(local_replica, op, deadline);
  }
  absl::Status CrossWorkerSum(const std::vector<engine::Tensor*>& values,
                              absl::Time deadline) override {
    return ops_->CrossWorkerSum(values, deadline);
  }
  void Abort() override { ops_->Abort(); }
  void PeerLost(int rank, const std::string& reason) override;
  AllReduceStats GradientAllReduceStats() const override { return ops_->GradientAllReduceStats(); }

 private:
  NcclAllReduce(std::shared_ptr<collectives::nccl::AbortSignal> signal,
                std::unique_ptr<CollectiveOps> ops,
                collectives::CollectiveCommunicator* cross_worker)
      : signal_(std::move(signal)), ops_(std::move(ops)), cross_worker_(cross_worker) {}

  const std::shared_ptr<collectives::nccl::AbortSignal> signal_;
  const std::unique_ptr<CollectiveOps> ops_;
  collectives::CollectiveCommunicator* const cross_worker_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_NCCL_ALL_REDUCE_H_
