#include "distribute/communication_backend.h"

namespace lockstep::distribute {

const char* ImplementationName(Implementation implementation) {
  switch (implementation) {
    case Implementation::kAuto:
      return "AUTO";
    case Implementation::kRing:
      return "RING";
    case Implementation::kNccl:
      return "NCCL";
  }
  return "?";
}

Implementation ImplementationFromSpec(v1::CommunicationSpec::Implementation implementation) {
  switch (implementation) {
    case v1::CommunicationSpec::RING:
      return Implementation::kRing;
    case v1::CommunicationSpec::NCCL:
      return Implementation::kNccl;
    default:
      return Implementation::kAuto;
  }
}

const char* CollectiveBackendName(CollectiveBackend backend) {
  return backend == CollectiveBackend::kNccl ? "NCCL" : "Lockstep collectives";
}

absl::StatusOr<CollectiveBackend> ResolveBackend(const BackendQuery& query) {
  const bool gpu = query.replicas == ReplicaKind::kGpu;
  switch (query.implementation) {
    case Implementation::kAuto:
      if (!gpu) return CollectiveBackend::kLockstep;
      if (!query.built_with_cuda) {
        return absl::UnimplementedError(
            "communication.implementation: AUTO picks NCCL for GPU replicas, but this build has "
            "no CUDA/NCCL support; build with --config=cuda, or place the replicas on /cpu:N");
      }
      return CollectiveBackend::kNccl;
    case Implementation::kRing:
      if (!gpu) return CollectiveBackend::kLockstep;
      return absl::InvalidArgumentError(
          "communication.implementation: RING runs Lockstep's own collectives, which move host "
          "memory, but the replicas are GPUs; use AUTO or NCCL for GPU replicas");
    case Implementation::kNccl:
      if (!query.built_with_cuda) {
        return absl::UnimplementedError(
            "communication.implementation: NCCL was requested, but this build has no CUDA/NCCL "
            "support; use AUTO or RING, or build with --config=cuda on a machine with GPUs");
      }
      if (!gpu) {
        return absl::InvalidArgumentError(
            "communication.implementation: NCCL needs GPU replicas, but the replicas are CPU "
            "devices; use AUTO or RING for CPU replicas, or ask for GPUs");
      }
      return CollectiveBackend::kNccl;
  }
  return absl::InvalidArgumentError("communication.implementation: unknown value");
}

}  // namespace lockstep::distribute
