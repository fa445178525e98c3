// CudaStatus: the one place where CUDA runtime errors become absl::Status. Built only under
// --config=cuda. Stateless; thread-safe.
#ifndef LOCKSTEP_COMMON_CUDA_CUDA_STATUS_H_
#define LOCKSTEP_COMMON_CUDA_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lockstep {

// OK for cudaSuccess; otherwise "<what>: <cudaGetErrorName>: <cudaGetErrorString>", with
// UNAVAILABLE when there is no usable GPU or driver (what to check: the driver,
// CUDA_VISIBLE_DEVICES), RESOURCE_EXHAUSTED when out of memory, INVALID_ARGUMENT for bad
// values and INTERNAL for the rest (a kernel fault leaves the context unusable).
absl::Status CudaStatus(cudaError_t error, absl::string_view what);

}  // namespace lockstep

#endif  // LOCKSTEP_COMMON_CUDA_CUDA_STATUS_H_
