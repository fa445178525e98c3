// MirroredStrategy: synchronous training on the devices of one worker
// (tf.distribute.MirroredStrategy): one replica per device, every variable mirrored on every
// device, values combined by the chosen CrossDeviceOps:
//   kNcclAllReduce (default on GPUs, as TensorFlow's NcclAllReduce): an NCCL group, one rank
//     per GPU (nccl_all_reduce.h), when communication.implementation resolves to NCCL
//     (communication_backend.h: AUTO or NCCL on GPU replicas);
//   kReduceToOneDevice (default on CPUs, as TensorFlow does for CPU devices): summed on the
//     host in replica order;
//   kCollective: an in-process Communicator group, one rank per device (ring when
//     communication.implementation is RING).
// Thread model: as Strategy.
#ifndef LOCKSTEP_DISTRIBUTE_MIRRORED_STRATEGY_H_
#define LOCKSTEP_DISTRIBUTE_MIRRORED_STRATEGY_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distribute/cross_device_ops.h"
#include "distribute/nccl_all_reduce.h"
#include "distribute/strategy.h"

namespace lockstep::distribute {

struct MirroredStrategyOptions {
  // Empty: every GPU, else every logical CPU device of `available`.
  std::vector<std::string> devices;
  LocalDevices available;
  // Unset: kNcclAllReduce when the replicas' collectives resolve to NCCL, else
  // kReduceToOneDevice.
  std::optional<CrossDeviceOpsKind> cross_device_ops;
  CommunicationOptions communication;
  NcclEnvironment nccl;  // GPU replicas over NCCL
};

class MirroredStrategy final : public Strategy {
 public:
  // Errors as ResolveDevices, CheckBackend and NcclAllReduce::Create;
  // INVALID_ARGUMENT for kNcclAllReduce when the replicas' collectives are not NCCL.
  static absl::StatusOr<std::unique_ptr<MirroredStrategy>> Create(
      const MirroredStrategyOptions& options = {});

 private:
  using Strategy::Strategy;
};

// The in-process Communicator group of `n` ranks that kCollective uses between the devices
// of one worker (shared with CentralStorage and MultiWorkerMirrored).
absl::StatusOr<std::vector<std::unique_ptr<collectives::CollectiveCommunicator>>> MakeInProcGroup(
    int n, CommunicationOptions::Implementation implementation);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_MIRRORED_STRATEGY_H_
