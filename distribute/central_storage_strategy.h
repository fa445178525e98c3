// CentralStorageStrategy: one worker, variables kept once on the host CPU, compute
// replicated on the devices (tf.distribute.experimental.CentralStorageStrategy). Every
// replica reads the central copy; gradients are reduced to the host (Destination::kHost)
// and the update is applied there once. On GPU replicas each replica reads the variables
// through one explicit host->device copy per variable and step into a device buffer reused
// across steps (StrategyExtended::ReadForReplica), and its gradients come back through one
// device->host copy each (BatchReduceTo); the optimizer runs on the host. NCCL is never used.
// Thread model: as Strategy.
#ifndef LOCKSTEP_DISTRIBUTE_CENTRAL_STORAGE_STRATEGY_H_
#define LOCKSTEP_DISTRIBUTE_CENTRAL_STORAGE_STRATEGY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distribute/strategy.h"

namespace lockstep::distribute {

struct CentralStorageStrategyOptions {
  // Compute devices; empty: every GPU, else every logical CPU device of `available`.
  std::vector<std::string> devices;
  LocalDevices available;
  CommunicationOptions communication;
};

class CentralStorageStrategy final : public Strategy {
 public:
  // Errors as ResolveDevices.
  static absl::StatusOr<std::unique_ptr<CentralStorageStrategy>> Create(
      const CentralStorageStrategyOptions& options = {});

 private:
  using Strategy::Strategy;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_CENTRAL_STORAGE_STRATEGY_H_
