// concat: CONCAT of two or more inputs along `axis` (default -1, the last).
#include "absl/strings/str_cat.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<int> BuildConcat(const LayerContext& ctx) {
  const Shape in = ctx.input_shape();
  const int64_t axis = ctx.layer->concat().axis() == 0 ? -1 : ctx.layer->concat().axis();
  if (axis < -in.rank() || axis >= in.rank()) {
    return FieldError(ctx.field("axis"),
                      absl::StrCat(axis, " is out of range for ", in.ToString()));
  }
  return ctx.graph->Concat(ctx.inputs, axis < 0 ? axis + in.rank() : axis, ctx.name);
}

}  // namespace

void RegisterConcat(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kConcat, nullptr, BuildConcat, LayerInputs::kSeveral});
}

}  // namespace lockstep::engine
