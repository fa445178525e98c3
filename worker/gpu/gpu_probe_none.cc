// ProbeGpus in the default (CPU-only) build.
#include "worker/gpu/gpu_probe.h"

namespace lockstep::worker {

absl::StatusOr<std::vector<GpuInfo>> ProbeGpus() {
  return absl::UnimplementedError(
      "this lockstepd was built without CUDA, so it cannot use GPUs: build it with "
      "`bazel build --config=cuda //worker:lockstepd` (needs the CUDA toolkit), or drop --gpus");
}

}  // namespace lockstep::worker
