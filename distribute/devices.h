// Resolving a strategy's device list against the devices this worker has (LocalDevices):
// "/cpu:N" must name one of the worker's logical CPU devices, "/gpu:N" one of its GPUs (none
// in a CPU-only build). Stateless; thread-safe.
#ifndef LOCKSTEP_DISTRIBUTE_DEVICES_H_
#define LOCKSTEP_DISTRIBUTE_DEVICES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distribute/communication_backend.h"
#include "distribute/strategy.h"
#include "engine/device.h"

namespace lockstep::distribute {

// `names` empty: every GPU, else every logical CPU device (tf.distribute's default).
// INVALID_ARGUMENT for an unparsable name or a device listed twice; NOT_FOUND for a device
// the worker does not have (the message lists the ones it has).
absl::StatusOr<std::vector<engine::Device>> ResolveDevices(const std::vector<std::string>& names,
                                                           const LocalDevices& available);

// Whether this binary was built with CUDA (and so NCCL). False in the default build.
bool BuiltWithCuda();

// The collectives that carry replicas on `devices` (all of one kind, else INVALID_ARGUMENT).
// With communication.backend given (a job's plan decided it): that backend, once this worker
// can run it (FAILED_PRECONDITION naming the fact when NCCL is asked of a worker without it,
// `built_with_cuda` false). Without: ResolveBackend (communication_backend.h) of
// communication.implementation, `built_with_cuda` saying whether NCCL is there
// (BuiltWithCuda(), or a fake NCCL in tests), its error prefixed with `strategy_name`.
absl::StatusOr<CollectiveBackend> CheckBackend(const CommunicationOptions& communication,
                                               const std::vector<engine::Device>& devices,
                                               bool built_with_cuda,
                                               const std::string& strategy_name);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_DEVICES_H_
