// Submit-time checks of what a job needs from the workers' devices: its replicas' kind
// (JobSpec.gpus) and communication.implementation, decided by the one table the strategies
// use too (distribute/communication_backend.h: ResolveBackend), so that submit and the
// workers cannot disagree. A job that asks for GPU replicas is refused when no ALIVE training
// worker offers a GPU (lockstepd built with --config=cuda on a GPU host), rather than failing
// once scheduled; NCCL for CPU replicas and RING for GPU ones are refused naming the field.
// Stateless functions.
#ifndef LOCKSTEP_COORDINATOR_GPU_REQUIREMENTS_H_
#define LOCKSTEP_COORDINATOR_GPU_REQUIREMENTS_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "lockstep/v1/cluster.pb.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep {
namespace coordinator {

// INVALID_ARGUMENT starting with "gpus: " when the spec asks for GPU replicas and none of
// `workers` (the ALIVE training workers) offers one, or with "communication.implementation: "
// when ResolveBackend refuses the implementation for the replicas' kind; the messages count
// the workers and say how to offer GPUs. A worker offers GPUs only when built with CUDA, so
// the build is taken to have it here; each worker's strategy checks its own build.
absl::Status CheckGpuRequirements(const v1::JobSpec& spec,
                                  absl::Span<const v1::TaskStatus> workers);

}  // namespace coordinator
}  // namespace lockstep

#endif  // LOCKSTEP_COORDINATOR_GPU_REQUIREMENTS_H_
