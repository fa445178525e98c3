#include "coordinator/gpu_requirements.h"

#include "absl/strings/str_cat.h"
#include "distribute/communication_backend.h"

namespace lockstep {
namespace coordinator {

absl::Status CheckGpuRequirements(const v1::JobSpec& spec,
                                  absl::Span<const v1::TaskStatus> workers) {
  bool offered = false;
  for (const v1::TaskStatus& t : workers) {
    for (const v1::Device& d : t.devices()) offered = offered || d.kind() == v1::Device::GPU;
  }
  const std::string how = absl::StrCat(
      "none of the ", workers.size(),
      " ALIVE training worker(s) offers a GPU (`lockstep status` lists their devices); start "
      "lockstepd built with --config=cuda on GPU hosts (--gpus)");
  if (spec.gpus() && !offered) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpus: the job asks for GPU replicas, but ", how));
  }
  distribute::BackendQuery query;
  query.implementation = distribute::ImplementationFromSpec(spec.communication().implementation());
  query.replicas = spec.gpus() ? distribute::ReplicaKind::kGpu : distribute::ReplicaKind::kCpu;
  query.built_with_cuda = true;
  absl::StatusOr<distribute::CollectiveBackend> backend = distribute::ResolveBackend(query);
  if (backend.ok()) return absl::OkStatus();
  std::string message(backend.status().message());
  if (!spec.gpus()) {
    absl::StrAppend(&message, " (the job's replicas are CPU devices: set `gpus: true` for GPUs",
                    offered ? "" : absl::StrCat("; ", how), ")");
  }
  return absl::InvalidArgumentError(message);
}

}  // namespace coordinator
}  // namespace lockstep
