// ProbeGpus: the GPUs the CUDA runtime shows this process (it applies CUDA_VISIBLE_DEVICES).
// Two implementations, chosen by the build: gpu_probe_cuda.cc (--config=cuda: the CUDA
// runtime) and gpu_probe_none.cc (default build: no CUDA). Stateless; thread-safe.
#ifndef LOCKSTEP_WORKER_GPU_GPU_PROBE_H_
#define LOCKSTEP_WORKER_GPU_GPU_PROBE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "worker/gpu/gpu_selection.h"

namespace lockstep::worker {

// The visible GPUs, in CUDA device order; empty when the driver reports no device.
// UNAVAILABLE when the driver is missing or too old (the message says what to check);
// UNIMPLEMENTED in a build without CUDA, saying to build with --config=cuda.
absl::StatusOr<std::vector<GpuInfo>> ProbeGpus();

}  // namespace lockstep::worker

#endif  // LOCKSTEP_WORKER_GPU_GPU_PROBE_H_
