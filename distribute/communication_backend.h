// The table of which collectives carry a job's replicas (the spec's
// communication.implementation). A job's backend is decided once, when the coordinator lowers
// the spec (jobspec/lower.h, against the workers' devices), and carried in its plan; the
// strategies take the planned backend as given (CommunicationOptions::backend) and consult the
// table themselves only when built directly, without a plan (distribute/devices.cc:
// CheckBackend, with the resolved replica devices and this binary's build). The table
// (ResolveBackend):
//   implementation   replicas  build has CUDA  ->
//   AUTO (or unset)  GPU       yes                kNccl
//   AUTO (or unset)  CPU       any                kLockstep (collectives/: ring, halving-doubling)
//   RING             CPU       any                kLockstep, ring
//   RING             GPU       any                INVALID_ARGUMENT: Lockstep's collectives move
//                                                 host memory, not the GPUs' device memory
//   NCCL             any       no                 UNIMPLEMENTED: this build has no CUDA/NCCL
//   NCCL             CPU       yes                INVALID_ARGUMENT: NCCL needs GPU replicas
//   NCCL             GPU       yes                kNccl
//   AUTO             GPU       no                 UNIMPLEMENTED (a GPU replica in a build
//                                                 without CUDA: the devices were misreported)
// Every message starts "communication.implementation: " and says what to use instead.
// Stateless; thread-safe.
#ifndef LOCKSTEP_DISTRIBUTE_COMMUNICATION_BACKEND_H_
#define LOCKSTEP_DISTRIBUTE_COMMUNICATION_BACKEND_H_

#include "absl/status/statusor.h"
#include "lockstep/v1/job_spec.pb.h"

namespace lockstep::distribute {

// What the job asked for (CommunicationOptions::implementation).
enum class Implementation { kAuto, kRing, kNccl };
const char* ImplementationName(Implementation implementation);
// The spec's field; IMPLEMENTATION_UNSPECIFIED is AUTO.
Implementation ImplementationFromSpec(v1::CommunicationSpec::Implementation implementation);

// What carries the replicas' collectives.
enum class CollectiveBackend {
  kLockstep,  // collectives::Communicator (TCP, shared memory, in-process)
  kNccl,      // collectives::nccl::NcclCommunicator
};
const char* CollectiveBackendName(CollectiveBackend backend);

enum class ReplicaKind { kCpu, kGpu };

struct BackendQuery {
  Implementation implementation = Implementation::kAuto;
  ReplicaKind replicas = ReplicaKind::kCpu;
  bool built_with_cuda = false;
};

// The table above.
absl::StatusOr<CollectiveBackend> ResolveBackend(const BackendQuery& query);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_COMMUNICATION_BACKEND_H_
