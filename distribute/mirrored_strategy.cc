#include "distribute/mirrored_strategy.h"

#include "absl/strings/str_cat.h"
#include "collectives/communicator_factory.h"
#include "common/status.h"
#include "distribute/collective_ops.h"
#include "distribute/devices.h"
#include "distribute/local_reduce_ops.h"

namespace lockstep::distribute {

absl::StatusOr<std::vector<std::unique_ptr<collectives::CollectiveCommunicator>>> MakeInProcGroup(
    int n, CommunicationOptions::Implementation implementation) {
  collectives::AlgorithmOptions algorithms;
  if (implementation == CommunicationOptions::Implementation::kRing) {
    algorithms.algorithm = collectives::AllReduceAlgorithm::kRing;
  }
  collectives::CommunicatorConfig config;
  config.world_size = n;
  config.transport = collectives::TransportKind::kInProc;
  config.inproc_hub = std::make_shared<collectives::InProcHub>(n);
  config.algorithms = algorithms;
  std::vector<std::unique_ptr<collectives::CollectiveCommunicator>> comms;
  for (int r = 0; r < n; ++r) {
    config.rank = r;
    LS_ASSIGN_OR_RETURN(std::unique_ptr<collectives::CollectiveCommunicator> c,
                        collectives::CreateCommunicator(config, /*store=*/nullptr));
    comms.push_back(std::move(c));
  }
  return comms;
}

absl::StatusOr<std::unique_ptr<MirroredStrategy>> MirroredStrategy::Create(
    const MirroredStrategyOptions& options) {
  StrategyConfig config;
  config.name = "MirroredStrategy";
  LS_ASSIGN_OR_RETURN(config.devices, ResolveDevices(options.devices, options.available));
  config.gpus = options.available.gpus;
  LS_ASSIGN_OR_RETURN(
      const CollectiveBackend backend,
      CheckBackend(options.communication, config.devices, HasNccl(options.nccl), config.name));
  config.communication = options.communication;
  const int n = static_cast<int>(config.devices.size());
  const CrossDeviceOpsKind kind = options.cross_device_ops.value_or(
      backend == CollectiveBackend::kNccl ? CrossDeviceOpsKind::kNcclAllReduce
                                          : CrossDeviceOpsKind::kReduceToOneDevice);
  if (kind == CrossDeviceOpsKind::kNcclAllReduce) {
    if (backend != CollectiveBackend::kNccl) {
      return absl::InvalidArgumentError(
          absl::StrCat(config.name,
                       ": cross_device_ops NcclAllReduce needs GPU replicas whose "
                       "communication.implementation resolves to NCCL; these use ",
                       CollectiveBackendName(backend)));
    }
    NcclAllReduceOptions o;
    o.env = options.nccl;
    o.devices = config.devices;
    o.gpus = config.gpus;
    o.num_replicas_in_sync = n;
    o.communication = options.communication;
    LS_ASSIGN_OR_RETURN(config.cross_device_ops, NcclAllReduce::Create(o));
  } else if (kind == CrossDeviceOpsKind::kCollective) {
    LS_ASSIGN_OR_RETURN(auto comms, MakeInProcGroup(n, options.communication.implementation));
    config.cross_device_ops = std::make_unique<CollectiveOps>(std::move(comms), n, nullptr,
                                                              options.communication.bytes_per_pack);
  } else {
    config.cross_device_ops =
        std::make_unique<LocalReduceOps>(n, n, nullptr, options.communication.bytes_per_pack);
  }
  return std::unique_ptr<MirroredStrategy>(new MirroredStrategy(std::move(config)));
}

}  // namespace lockstep::distribute
