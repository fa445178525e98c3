// maxpool2d: MAX_POOL2D of an NHWC input; pool_size [2, 2] and strides equal to it by
// default, padding VALID by default.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

// The window and the strides, as the spec gives them or by default.
struct Window {
  std::vector<int> size;
  std::vector<int> strides;
};

absl::StatusOr<Window> PoolWindow(const v1::MaxPool2DLayer& p, absl::string_view where) {
  Window w;
  LS_ASSIGN_OR_RETURN(w.size, Pair(p.pool_size(), absl::StrCat(where, ".pool_size"), 2));
  w.strides = w.size;
  if (!p.strides().empty()) {
    LS_ASSIGN_OR_RETURN(w.strides, Pair(p.strides(), absl::StrCat(where, ".strides"), 1));
  }
  return w;
}

absl::Status CheckMaxPool2D(const v1::Layer& layer, absl::string_view where) {
  return PoolWindow(layer.maxpool2d(), where).status();
}

absl::StatusOr<int> BuildMaxPool2D(const LayerContext& ctx) {
  const v1::MaxPool2DLayer& p = ctx.layer->maxpool2d();
  LS_ASSIGN_OR_RETURN(Window w, PoolWindow(p, ctx.where));
  const Shape in = ctx.input_shape();
  if (in.rank() != 4) {
    return FieldError(ctx.where, absl::StrCat("input ", in.ToString(),
                                              " is not [batch, height, width, channels]"));
  }
  v1::Padding padding = p.padding() == v1::PADDING_UNSPECIFIED ? v1::VALID : p.padding();
  return ctx.graph->MaxPool2D(ctx.input(), w.size, w.strides, padding, ctx.name);
}

}  // namespace

void RegisterMaxPool2D(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kMaxpool2D, CheckMaxPool2D, BuildMaxPool2D});
}

}  // namespace lockstep::engine
