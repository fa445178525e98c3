// Building blocks of the ops' shape functions (engine/ops/*.cc, registered in an
// OpRegistry): the typed shape a node outputs, compatibility of static shapes (-1 for the
// batch dimension), the error every shape function answers, and the window geometry shared
// by convolution and pooling. Used at graph build time (static shapes) and by kernels at
// run time (concrete shapes), so the two never disagree. Stateless.
#ifndef LOCKSTEP_ENGINE_SHAPE_INFERENCE_H_
#define LOCKSTEP_ENGINE_SHAPE_INFERENCE_H_

#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/dtype.h"
#include "engine/shape.h"
#include "lockstep/v1/graph.pb.h"

namespace lockstep::engine {

struct TypedShape {
  Shape shape;
  DType dtype = DType::kF32;
};

// INVALID_ARGUMENT "<OP> node \"<name>\": <what>".
absl::Status ShapeError(const v1::NodeDef& node, absl::string_view what);

bool DimsCompatible(int64_t a, int64_t b);  // equal, or either unknown (-1)
bool ShapesCompatible(const Shape& a, const Shape& b);
bool IsFloat(DType d);
bool IsInt(DType d);
// OK when every input is f32, or every input is f64.
absl::Status CheckSameFloatDTypes(const v1::NodeDef& node, const std::vector<TypedShape>& in);

// OK when both inputs are f32 (or f64) of compatible shapes.
absl::Status CheckSameFloatShapes(const v1::NodeDef& node, const std::vector<TypedShape>& in);

// A [h, w] attribute given as [k] or [h, w] of positive numbers; `fallback` when empty.
absl::StatusOr<std::pair<int, int>> WindowPair(const v1::NodeDef& node,
                                               const google::protobuf::RepeatedField<int32_t>& v,
                                               absl::string_view field, int fallback);

// Output size of a convolution or pooling window along one dimension; -1 stays -1.
int64_t WindowOutputSize(int64_t in, int64_t window, int64_t stride, v1::Padding padding);
// Leading padding (SAME pads ceil on the trailing side, like TensorFlow).
int64_t WindowPadBefore(int64_t in, int64_t window, int64_t stride, v1::Padding padding);

// Axes of a SUM/MEAN node made non-negative and sorted (all axes when empty).
std::vector<int> NormalizedAxes(const v1::NodeDef& node, int rank);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_SHAPE_INFERENCE_H_
