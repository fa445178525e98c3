// Small host-side tensor arithmetic the distribution layer needs on its own (summing
// replicas' values, splitting and joining batches along axis 0), kept apart from the
// engine's graph kernels so that reductions have one fixed, documented order.
//
// Every function works on f32, f64, i32 and i64 tensors and answers INVALID_ARGUMENT
// (naming both shapes or the dtype) instead of crashing. Stateless; thread-safe.
#ifndef LOCKSTEP_DISTRIBUTE_TENSOR_MATH_H_
#define LOCKSTEP_DISTRIBUTE_TENSOR_MATH_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collectives/types.h"
#include "engine/device.h"
#include "engine/tensor.h"

namespace lockstep::distribute {

// The collectives' element type for an engine dtype.
collectives::DType ToCollectiveDType(engine::DType dtype);

// *acc += x, element-wise; same dtype and shape.
absl::Status AddInto(const engine::Tensor& x, engine::Tensor* acc);
// *t /= divisor (integer division for integer dtypes, as tf.distribute's MEAN).
absl::Status DivideBy(double divisor, engine::Tensor* t);
// Sum over axis 0: [n, d...] -> [d...]. Rank 0 is refused.
absl::StatusOr<engine::Tensor> SumAxis0(const engine::Tensor& x);
// Rows [begin, end) of axis 0 (a copy), end clamped to dim 0; may be empty.
absl::StatusOr<engine::Tensor> SliceAxis0(const engine::Tensor& x, int64_t begin, int64_t end);
// Joins along axis 0; every part has the same dtype and trailing dimensions.
absl::StatusOr<engine::Tensor> ConcatAxis0(const std::vector<engine::Tensor>& parts);
// A deep copy tagged with `device` (logical CPU devices share host memory). A GPU replica's
// values stay in host memory, tagged as host memory: the strategies do not yet hold a GPU
// device context per replica (engine/gpu), and a tensor tagged /gpu:N must hold device memory
// (engine/tensor.h). Real GPU replicas need that context first; the NCCL tests run their fake
// ranks on these host values.
engine::Tensor CopyToDevice(const engine::Tensor& x, const engine::Device& device);

}  // namespace lockstep::distribute

#endif  // LOCKSTEP_DISTRIBUTE_TENSOR_MATH_H_
