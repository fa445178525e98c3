#include "coordinator/gpu_requirements.h"

#include "absl/strings/str_cat.h"

namespace lockstep {
namespace coordinator {

absl::Status CheckGpuRequirements(const v1::JobSpec& spec,
                                  absl::Span<const v1::TaskStatus> workers) {
  if (spec.communication().implementation() != v1::CommunicationSpec::NCCL) {
    return absl::OkStatus();
  }
  for (const v1::TaskStatus& t : workers) {
    for (const v1::Device& d : t.devices()) {
      if (d.kind() == v1::Device::GPU) return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "communication.implementation: NCCL needs GPU replicas, but none of the ", workers.size(),
      " ALIVE training worker(s) offers a GPU (`lockstep status` lists their devices); use AUTO "
      "or RING for CPU replicas, or start lockstepd built with --config=cuda on GPU hosts "
      "(--gpus)"));
}

}  // namespace coordinator
}  // namespace lockstep
