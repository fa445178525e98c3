// NcclAllReduce: CrossDeviceOps over NCCL (tf.distribute.NcclAllReduce), the default for
// Mirrored and MultiWorkerMirrored on GPU replicas (communication.implementation AUTO or NCCL:
// communication_backend.h). Every local GPU replica owns one rank of an NCCL group
// (collectives::nccl::NcclCommunicator through the CollectiveCommunicator interface, as
// CollectiveOps' in-process and TCP groups): ranks first_rank .. first_rank + n - 1 of a
// group of num_replicas_in_sync, the unique id exchanged through `store`. Gradient packs are
// fused per bytes_per_pack (collectives::FusedAllReduce: one NCCL group per pack) and run on
// each communicator's own thread and on a communication stream of its GPU, made here (one per
// replica, through the CudaApi of its DeviceContext) and destroyed with this object. The
// streams are ordered by events only (NcclCommunicator's "stream of its own"): a pack's
// all-reduce waits for an event recorded on the compute stream when the pack was submitted,
// so the rest of the backward pass runs on the compute stream while the pack is reduced, and
// the compute stream waits for the pack's done event before the optimizer reads it; no host
// or device-wide synchronisation. communication.compression BF16 narrows each gradient to
// bf16 device scratch on the compute stream (before the pack's ready event), all-reduces it
// as ncclBfloat16 on the communication stream and widens the result back on the compute
// stream after the done event (DeviceBf16Codec, device_bf16_codec.h). Replicas without a
// GpuDevice (host values placed on /gpu:N, in tests) enqueue on the default stream.
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
  // Their engine devices (may be null): each communicator then enqueues on a communication
  // stream of its device, ordered against the device's compute stream by events.
  std::shared_ptr<GpuDeviceSet> gpus;
  int first_rank = 0;            // of the local replica 0 in the group
  int num_replicas_in_sync = 1;  // the group's size
  // Rendezvous of the unique id (not owned; used by Create only) under `key`; null: a
  // private in-memory one (every rank is local).
  collectives::Store* store = nullptr;
  std::string key = "nccl";
  collectives::CollectiveCommunicator* cross_worker = nullptr;  // CrossWorkerSum; not owned
  CommunicationOptions communication;                           // timeout, packs, compression
  // Tests only: the communicators leave out the compute -> communication stream event wait
  // (NcclCommunicatorOptions::wait_for_producer), the mutation the stream tests catch.
  bool test_skip_producer_wait = false;
};

class NcclAllReduce final : public CrossDeviceOps {
 public:
  // INVALID_ARGUMENT without an api or for a device that is not a GPU; a communication
  // stream's creation error naming the device; otherwise the NCCL init's errors
  // (NcclCommunicator::Create) of the first local replica that failed, naming its rank.
  static absl::StatusOr<std::unique_ptr<NcclAllReduce>> Create(const NcclAllReduceOptions& options);
  // The communicators first (their queued calls end), then the communication streams.
  ~NcclAllReduce() override;

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

  // One GPU's communication stream, made by Create through `api`.
  struct CommStream {
    CudaApi* api = nullptr;
    CudaStream stream = nullptr;
  };
  // Replica r's (null stream: the replica has no GpuDevice); tests.
  const std::vector<CommStream>& comm_streams() const { return streams_; }

 private:
  NcclAllReduce(std::shared_ptr<collectives::nccl::AbortSignal> signal,
                std::vector<CommStream> streams, std::unique_ptr<CollectiveOps> ops,
                collectives::CollectiveCommunicator* cross_worker)
      : signal_(std::move(signal)),
        streams_(std::move(streams)),
        ops_(std::move(ops)),
        cross_worker_(cross_worker) {}
  // Destroys the streams Create made (on its error paths too).
  static void DestroyStreams(const std::vector<CommStream>& streams);

  const std::shared_ptr<collectives::nccl::AbortSignal> signal_;
  const std::vector<CommStream> streams_;
  std::unique_ptr<CollectiveOps> ops_;
  collectives::CollectiveCommunicator* const cross_worker_;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_NCCL_ALL_REDUCE_H_
