#include "distribute/central_storage_strategy.h"

#include "common/status.h"
#include "distribute/devices.h"
#include "distribute/local_reduce_ops.h"

namespace lockstep::distribute {

absl::StatusOr<std::unique_ptr<CentralStorageStrategy>> CentralStorageStrategy::Create(
    const CentralStorageStrategyOptions& options) {
  StrategyConfig config;
  config.name = "CentralStorageStrategy";
  LS_ASSIGN_OR_RETURN(config.devices, ResolveDevices(options.devices, options.available));
  config.gpus = options.available.gpus;
  // The values reduce on the host whatever the backend, so NCCL is never used: GPU replicas
  // with engine devices (a CUDA build's, or the tests' fakes) pass the check without it; a
  // request that contradicts the devices (RING on GPUs, NCCL on CPUs) is still refused.
  LS_RETURN_IF_ERROR(CheckBackend(options.communication, config.devices,
                                  BuiltWithCuda() || options.available.gpus != nullptr, config.name)
                         .status());
  config.communication = options.communication;
  config.variable_kind = DistributedVariable::Kind::kCentral;
  const int n = static_cast<int>(config.devices.size());
  // Reduction to one device (the host) is what central storage means.
  config.cross_device_ops =
      std::make_unique<LocalReduceOps>(n, n, nullptr, options.communication.bytes_per_pack);
  return std::unique_ptr<CentralStorageStrategy>(new CentralStorageStrategy(std::move(config)));
}

}  // namespace lockstep::distribute
