#include "engine/shape_inference.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace lockstep::engine {

absl::Status ShapeError(const v1::NodeDef& node, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(v1::OpType_Name(node.op()), " node \"", node.name(), "\": ", what));
}

bool DimsCompatible(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

bool ShapesCompatible(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i) {
    if (!DimsCompatible(a.dim(i), b.dim(i))) return false;
  }
  return true;
}

bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kF64; }
bool IsInt(DType d) { return d == DType::kI32 || d == DType::kI64; }

absl::Status CheckSameFloatDTypes(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  for (const TypedShape& t : in) {
    if (t.dtype != in[0].dtype || !IsFloat(t.dtype)) {
      return ShapeError(node, absl::StrCat("inputs must all be f32 or all f64, got ",
                                           DTypeName(in[0].dtype), " and ", DTypeName(t.dtype)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSameFloatShapes(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  if (absl::Status s = CheckSameFloatDTypes(node, in); !s.ok()) return s;
  if (!ShapesCompatible(in[0].shape, in[1].shape)) {
    return ShapeError(node, absl::StrCat("shapes ", in[0].shape.ToString(), " and ",
                                         in[1].shape.ToString(), " differ"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<int, int>> WindowPair(const v1::NodeDef& node,
                                               const google::protobuf::RepeatedField<int32_t>& v,
                                               absl::string_view field, int fallback) {
  if (v.empty()) return std::make_pair(fallback, fallback);
  if (v.size() > 2 || v[0] <= 0 || v[v.size() - 1] <= 0) {
    return ShapeError(node, absl::StrCat(field, " must be 1 or 2 positive numbers"));
  }
  return std::make_pair(v[0], v[v.size() - 1]);
}

int64_t WindowOutputSize(int64_t in, int64_t window, int64_t stride, v1::Padding padding) {
  if (in < 0) return -1;
  if (padding == v1::SAME) return (in + stride - 1) / stride;
  return in < window ? 0 : (in - window) / stride + 1;
}

int64_t WindowPadBefore(int64_t in, int64_t window, int64_t stride, v1::Padding padding) {
  if (padding != v1::SAME) return 0;
  int64_t out = WindowOutputSize(in, window, stride, padding);
  int64_t total = std::max<int64_t>(0, (out - 1) * stride + window - in);
  return total / 2;
}

std::vector<int> NormalizedAxes(const v1::NodeDef& node, int rank) {
  std::vector<int> axes;
  if (node.axes().empty()) {
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  } else {
    for (int64_t a : node.axes()) axes.push_back(static_cast<int>(a < 0 ? a + rank : a));
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

}  // namespace lockstep::engine
