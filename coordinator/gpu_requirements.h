// Submit-time checks of what a job needs from the workers' devices: a job that asks for
// NCCL (communication.implementation) needs GPU replicas, so it is refused when no ALIVE
// training worker offers a GPU (lockstepd --gpus, in a --config=cuda build), rather than
// failing once scheduled. AUTO and RING need nothing: AUTO picks NCCL for GPU replicas and
// Lockstep's own collectives for CPU ones (worker side). Stateless functions.
#ifndef LOCKSTEP_COORDINATOR_GPU_REQUIREMENTS_H_
#define LOCKSTEP_COORDINATOR_GPU_REQUIREMENTS_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "lockstep/v1/cluster.pb.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace coordinator {

// INVALID_ARGUMENT starting with "communication.implementation: " when the spec asks for
// NCCL and none of `workers` (the ALIVE training workers) has a GPU; the message counts them
// and says how to offer GPUs.
absl::Status CheckGpuRequirements(const v1::JobSpec& spec,
                                  absl::Span<const v1::TaskStatus> workers);

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GPU_REQUIREMENTS_H_
