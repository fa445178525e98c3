// flatten: FLATTEN [batch, ...] to [batch, product of the rest].
#include "absl/strings/str_cat.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<int> BuildFlatten(const LayerContext& ctx) {
  const Shape in = ctx.input_shape();
  if (in.rank() < 2) {
    return FieldError(ctx.where, absl::StrCat("input ", in.ToString(), " has no feature axes"));
  }
  return ctx.graph->Op(v1::FLATTEN, {ctx.input()}, ctx.name);
}

}  // namespace

void RegisterFlatten(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kFlatten, nullptr, BuildFlatten});
}

}  // namespace lockstep::engine
