// Output shape and dtype of a graph node from its inputs' shapes and dtypes. Used both at
// graph build time (static shapes, -1 for the batch dimension) and by the executor at run
// time (concrete shapes), so the two never disagree. Stateless.
#ifndef LOCKSTEP_ENGINE_SHAPE_INFERENCE_H_
#define LOCKSTEP_ENGINE_SHAPE_INFERENCE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/dtype.h"
#include "engine/shape.h"
#include "lockstep/v1/graph.pb.h"

namespace lockstep::engine {

struct TypedShape {
  Shape shape;
  DType dtype = DType::kF32;
};

// INVALID_ARGUMENT naming the op and the mismatch when the inputs do not fit the node
// (wrong count, rank, dims, dtypes, attributes). INPUT and VARIABLE nodes answer their own
// declared shape and dtype.
absl::StatusOr<TypedShape> InferOutput(const v1::NodeDef& node,
                                       const std::vector<TypedShape>& inputs);

// Output size of a convolution or pooling window along one dimension; -1 stays -1.
int64_t WindowOutputSize(int64_t in, int64_t window, int64_t stride, v1::Padding padding);
// Leading padding (SAME pads ceil on the trailing side, like TensorFlow).
int64_t WindowPadBefore(int64_t in, int64_t window, int64_t stride, v1::Padding padding);

// Axes of a SUM/MEAN node made non-negative and sorted (all axes when empty).
std::vector<int> NormalizedAxes(const v1::NodeDef& node, int rank);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_SHAPE_INFERENCE_H_
