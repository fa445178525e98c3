// What a weights export writes, taken from a restored checkpoint: the model's variables under
// their graph names ("dense/kernel"), optionally followed by the optimizer slots
// ("dense/kernel/m"), and string metadata (the job, the step, the job spec when known).
// Every tensor is checked once here (a known dtype, content of exactly the shape's size), so
// the format writers (safetensors.h, npz.h) only lay bytes out.
//
// Thread model: plain functions and values; no shared state.
#ifndef LOCKSTEP_EXPORT_WEIGHTS_H_
#define LOCKSTEP_EXPORT_WEIGHTS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lockstep/v1/checkpoint.pb.h"
#include "lockstep/v1/tensor.pb.h"

namespace lockstep::exporting {

struct WeightsOptions {
  bool with_optimizer_state = false;  // add Checkpoint.optimizer_slots after the variables
  // The job spec as JSON, stored as the "spec" metadata entry; empty: none.
  std::string spec_json;
};

// Tensors in export order and metadata ("job_id", "job_uid", "attempt", "step", "spec").
struct Weights {
  std::vector<v1::NamedTensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Bytes per element of `dtype`; 0 for DTYPE_UNSPECIFIED or an unknown value.
size_t ElementSize(v1::DType dtype);

// Product of the dims (1 for a scalar); -1 when a dim is negative or the product overflows.
int64_t NumElements(const v1::TensorShape& shape);

// OK when `tensor` has a name, a known dtype, non-negative dims and content of exactly
// num_elements * ElementSize bytes; otherwise INVALID_ARGUMENT naming the tensor.
absl::Status CheckTensor(const v1::NamedTensor& tensor);

// The variables (and slots, when asked) of `checkpoint`, each checked (CheckTensor), with
// the checkpoint's job and step as metadata. INVALID_ARGUMENT naming the first bad tensor, or
// a name that appears twice, or a checkpoint with no variables.
absl::StatusOr<Weights> WeightsFromCheckpoint(const v1::Checkpoint& checkpoint,
                                              const WeightsOptions& options);

}  // namespace lockstep::exporting

#endif  // LOCKSTEP_EXPORT_WEIGHTS_H_
