#include "distribute/one_device_strategy.h"

#include "common/status.h"
#include "distribute/devices.h"
#include "distribute/local_reduce_ops.h"

namespace lockstep::distribute {

absl::StatusOr<std::unique_ptr<OneDeviceStrategy>> OneDeviceStrategy::Create(
    const std::string& device, const LocalDevices& available) {
  StrategyConfig config;
  config.name = "OneDeviceStrategy";
  LS_ASSIGN_OR_RETURN(config.devices, ResolveDevices({device}, available));
  config.gpus = available.gpus;
  config.cross_device_ops = std::make_unique<LocalReduceOps>(1, 1, nullptr, 0);
  return std::unique_ptr<OneDeviceStrategy>(new OneDeviceStrategy(std::move(config)));
}

}  // namespace lockstep::distribute
