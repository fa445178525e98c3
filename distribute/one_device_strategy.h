// OneDeviceStrategy: one replica on one device (tf.distribute.OneDeviceStrategy). Variables
// are mirrored over that single device; reductions are local. Useful as the reference the
// other strategies must agree with. Thread model: as Strategy.
#ifndef LOCKSTEP_DISTRIBUTE_ONE_DEVICE_STRATEGY_H_
#define LOCKSTEP_DISTRIBUTE_ONE_DEVICE_STRATEGY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "distribute/strategy.h"

namespace lockstep::distribute {

class OneDeviceStrategy final : public Strategy {
 public:
  // Errors as ResolveDevices.
  static absl::StatusOr<std::unique_ptr<OneDeviceStrategy>> Create(
      const std::string& device = "/cpu:0", const LocalDevices& available = {});

 private:
  using Strategy::Strategy;
};

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_ONE_DEVICE_STRATEGY_H_
