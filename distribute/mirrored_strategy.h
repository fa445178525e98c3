// MirroredStrategy: synchronous training on the devices of one worker
// (tf.distribute.MirroredStrategy): one replica per device, every variable mirrored on every
// device, values combined by the chosen CrossDeviceOps:
//   kReduceToOneDevice (default on CPUs, as TensorFlow does for CPU devices): summed on the
//     host in replica order;
//   kCollective: an in-process Communicator group, one rank per device (ring when
//     communication.implementation is RING; NCCL refused in a CPU-only build).
// Thread model: as Strategy.
#ifndef LOCKSTEP_DISTRIBUTE_MIRRORED_STRATEGY_H_
#define LOCKSTEP_DISTRIBUTE_MIRRORED_STRATEGY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distribute/cross_device_ops.h"
#include "distribute/strategy.h"

namespace lockstep::distribute {

struct MirroredStrategyOptions {
  // Empty: every GPU, else every logical CPU device of `available`.
  std::vector<std::string> devices;
  LocalDevices available;
  CrossDeviceOpsKind cross_device_ops = CrossDeviceOpsKind::kReduceToOneDevice;
  CommunicationOptions communication;
};

class MirroredStrategy final : public Strategy {
 public:
  // Errors as ResolveDevices, CheckImplementation and CheckCompression.
  static absl::StatusOr<std::unique_ptr<MirroredStrategy>> Create(
      const MirroredStrategyOptions& options = {});

 private:
  using Strategy::Strategy;
};

// The in-process Communicator group of `n` ranks that kCollective uses between the devices
// of one worker (shared with CentralStorage and MultiWorkerMirrored).
absl::StatusOr<std::vector<std::unique_ptr<collectives::Communicator>>> MakeInProcGroup(
    int n, CommunicationOptions::Implementation implementation);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_MIRRORED_STRATEGY_H_
