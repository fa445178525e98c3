#include "engine/shape_inference.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace lockstep::engine {
namespace {

bool DimsCompatible(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

bool ShapesCompatible(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i) {
    if (!DimsCompatible(a.dim(i), b.dim(i))) return false;
  }
  return true;
}

absl::Status Error(const v1::NodeDef& node, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(v1::OpType_Name(node.op()), " node \"", node.name(), "\": ", what));
}

bool IsInt(DType d) { return d == DType::kI32 || d == DType::kI64; }

int NumInputs(v1::OpType op) {
  switch (op) {
    case v1::INPUT:
    case v1::VARIABLE:
      return 0;
    case v1::MATMUL:
    case v1::ADD:
    case v1::SUB:
    case v1::MUL:
    case v1::BIAS_ADD:
    case v1::SPARSE_SOFTMAX_CROSS_ENTROPY:
    case v1::MEAN_SQUARED_ERROR:
    case v1::CONV2D:
    case v1::ACCURACY:
      return 2;
    default:
      return 1;
  }
}

absl::StatusOr<std::pair<int, int>> Pair(const v1::NodeDef& node,
                                         const google::protobuf::RepeatedField<int32_t>& v,
                                         absl::string_view field, int fallback) {
  if (v.empty()) return std::make_pair(fallback, fallback);
  if (v.size() > 2 || v[0] <= 0 || v[v.size() - 1] <= 0) {
    return Error(node, absl::StrCat(field, " must be 1 or 2 positive numbers"));
  }
  return std::make_pair(v[0], v[v.size() - 1]);
}

}  // namespace

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

absl::StatusOr<TypedShape> InferOutput(const v1::NodeDef& node, const std::vector<TypedShape>& in) {
  if (static_cast<int>(in.size()) != NumInputs(node.op())) {
    return Error(node, absl::StrCat("takes ", NumInputs(node.op()), " inputs, got ", in.size()));
  }
  auto same_float_dtypes = [&]() -> absl::Status {
    for (const TypedShape& t : in) {
      if (t.dtype != in[0].dtype || !(t.dtype == DType::kF32 || t.dtype == DType::kF64)) {
        return Error(node, absl::StrCat("inputs must all be f32 or all f64, got ",
                                        DTypeName(in[0].dtype), " and ", DTypeName(t.dtype)));
      }
    }
    return absl::OkStatus();
  };
  switch (node.op()) {
    case v1::INPUT:
    case v1::VARIABLE: {
      auto dtype = DTypeFromProto(node.dtype());
      if (!dtype.ok()) return Error(node, dtype.status().message());
      return TypedShape{Shape::FromProto(node.shape()), *dtype};
    }
    case v1::MATMUL: {
      if (absl::Status s = same_float_dtypes(); !s.ok()) return s;
      const Shape &a = in[0].shape, &b = in[1].shape;
      if (a.rank() != 2 || b.rank() != 2 || !DimsCompatible(a.dim(1), b.dim(0))) {
        return Error(node, absl::StrCat("cannot multiply ", a.ToString(), " by ", b.ToString()));
      }
      return TypedShape{Shape{a.dim(0), b.dim(1)}, in[0].dtype};
    }
    case v1::ADD:
    case v1::SUB:
    case v1::MUL:
    case v1::MEAN_SQUARED_ERROR: {
      if (absl::Status s = same_float_dtypes(); !s.ok()) return s;
      if (!ShapesCompatible(in[0].shape, in[1].shape)) {
        return Error(node, absl::StrCat("shapes ", in[0].shape.ToString(), " and ",
                                        in[1].shape.ToString(), " differ"));
      }
      if (node.op() == v1::MEAN_SQUARED_ERROR) return TypedShape{Shape{}, in[0].dtype};
      return in[0];
    }
    case v1::BIAS_ADD: {
      if (absl::Status s = same_float_dtypes(); !s.ok()) return s;
      const Shape &x = in[0].shape, &b = in[1].shape;
      if (x.rank() < 1 || b.rank() != 1 || !DimsCompatible(x[-1], b.dim(0))) {
        return Error(node, absl::StrCat("bias ", b.ToString(), " does not match the last axis of ",
                                        x.ToString()));
      }
      return in[0];
    }
    case v1::RELU:
    case v1::SIGMOID:
    case v1::TANH:
    case v1::SOFTMAX:
    case v1::DROPOUT: {
      if (absl::Status s = same_float_dtypes(); !s.ok()) return s;
      if (node.op() == v1::SOFTMAX && in[0].shape.rank() < 1) {
        return Error(node, "needs rank >= 1");
      }
      if (node.op() == v1::DROPOUT && !(node.rate() >= 0 && node.rate() < 1)) {
        return Error(node, absl::StrCat("rate ", node.rate(), " is not in [0, 1)"));
      }
      return in[0];
    }
    case v1::SPARSE_SOFTMAX_CROSS_ENTROPY:
    case v1::ACCURACY: {
      const Shape &logits = in[0].shape, &labels = in[1].shape;
      if (in[0].dtype != DType::kF32 && in[0].dtype != DType::kF64) {
        return Error(node, "logits must be f32 or f64");
      }
      if (!IsInt(in[1].dtype)) return Error(node, "labels must be i32 or i64");
      if (logits.rank() != 2 || labels.rank() != 1 ||
          !DimsCompatible(logits.dim(0), labels.dim(0))) {
        return Error(node, absl::StrCat("needs logits [batch, classes] and labels [batch], got ",
                                        logits.ToString(), " and ", labels.ToString()));
      }
      return TypedShape{Shape{}, node.op() == v1::ACCURACY ? DType::kF32 : in[0].dtype};
    }
    case v1::SUM:
    case v1::MEAN: {
      if (absl::Status s = same_float_dtypes(); !s.ok()) return s;
      const Shape& x = in[0].shape;
      for (int64_t a : node.axes()) {
        if (a < -x.rank() || a >= x.rank()) {
          return Error(node, absl::StrCat("axis ", a, " out of range for ", x.ToString()));
        }
      }
      std::vector<int> axes = NormalizedAxes(node, x.rank());
      std::vector<int64_t> dims;
      for (int i = 0; i < x.rank(); ++i) {
        bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
        if (!reduced) {
          dims.push_back(x.dim(i));
        } else if (node.keep_dims()) {
          dims.push_back(1);
        }
      }
      return TypedShape{Shape(dims), in[0].dtype};
    }
    case v1::RESHAPE: {
      const Shape& x = in[0].shape;
      std::vector<int64_t> dims(node.target_shape().begin(), node.target_shape().end());
      int unknown = -1;
      int64_t known = 1;
      for (int i = 0; i < static_cast<int>(dims.size()); ++i) {
        if (dims[i] == -1) {
          if (unknown >= 0) return Error(node, "target_shape has more than one -1");
          unknown = i;
        } else if (dims[i] <= 0) {
          return Error(node, absl::StrCat("target_shape dimension ", dims[i], " is not positive"));
        } else {
          known *= dims[i];
        }
      }
      if (x.fully_known()) {
        int64_t n = x.num_elements();
        if (unknown >= 0) {
          if (n % known != 0) {
            return Error(node, absl::StrCat("cannot reshape ", x.ToString(), " to ",
                                            Shape(dims).ToString()));
          }
          dims[unknown] = n / known;
        } else if (n != known) {
          return Error(
              node, absl::StrCat("cannot reshape ", x.ToString(), " to ", Shape(dims).ToString()));
        }
      } else if (unknown < 0) {
        return Error(node, "reshaping an input of unknown size needs a -1 in target_shape");
      } else {
        int64_t per = 1;
        for (int i = 1; i < x.rank(); ++i) per *= x.dim(i);
        if (x.dim(0) < 0 && x.rank() > 0) {
          // Unknown batch: the per-example part must divide what is known.
          if (known % per != 0 && per % known != 0) {
            return Error(node, absl::StrCat("cannot reshape ", x.ToString(), " to ",
                                            Shape(dims).ToString()));
          }
        }
      }
      return TypedShape{Shape(dims), in[0].dtype};
    }
    case v1::FLATTEN: {
      const Shape& x = in[0].shape;
      if (x.rank() < 1) return Error(node, "needs rank >= 1");
      int64_t per = 1;
      for (int i = 1; i < x.rank(); ++i) per *= x.dim(i);
      return TypedShape{Shape{x.dim(0), per}, in[0].dtype};
    }
    case v1::CONV2D:
    case v1::MAX_POOL2D: {
      if (absl::Status s = same_float_dtypes(); !s.ok()) return s;
      const Shape& x = in[0].shape;
      if (x.rank() != 4) return Error(node, absl::StrCat("input ", x.ToString(), " is not NHWC"));
      if (node.padding() != v1::VALID && node.padding() != v1::SAME) {
        return Error(node, "padding must be VALID or SAME");
      }
      int64_t kh, kw, channels;
      std::pair<int, int> strides;
      if (node.op() == v1::CONV2D) {
        const Shape& f = in[1].shape;
        if (f.rank() != 4 || !DimsCompatible(f.dim(2), x.dim(3))) {
          return Error(node, absl::StrCat("filter ", f.ToString(),
                                          " is not [h, w, in_channels, out_channels] for input ",
                                          x.ToString()));
        }
        kh = f.dim(0), kw = f.dim(1), channels = f.dim(3);
        LS_ASSIGN_OR_RETURN(strides, Pair(node, node.strides(), "strides", 1));
      } else {
        LS_ASSIGN_OR_RETURN(auto window, Pair(node, node.window(), "window", 2));
        kh = window.first, kw = window.second, channels = x.dim(3);
        LS_ASSIGN_OR_RETURN(strides, Pair(node, node.strides(), "strides", 0));
        if (node.strides().empty()) strides = window;  // pooling strides default to the window
      }
      int64_t oh = WindowOutputSize(x.dim(1), kh, strides.first, node.padding());
      int64_t ow = WindowOutputSize(x.dim(2), kw, strides.second, node.padding());
      if (oh == 0 || ow == 0) {
        return Error(node, absl::StrCat("window ", kh, "x", kw, " does not fit input ",
                                        x.ToString(), " with VALID padding"));
      }
      return TypedShape{Shape{x.dim(0), oh, ow, channels}, in[0].dtype};
    }
    case v1::ARGMAX: {
      const Shape& x = in[0].shape;
      if (x.rank() < 1) return Error(node, "needs rank >= 1");
      std::vector<int64_t> dims(x.dims().begin(), x.dims().end() - 1);
      return TypedShape{Shape(dims), DType::kI64};
    }
    default:
      return Error(node, "unknown op");
  }
}

}  // namespace lockstep::engine
