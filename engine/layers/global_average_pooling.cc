// global_average_pooling: [batch, ..., channels] -> [batch, channels], the MEAN over every
// axis between them.
#include "absl/strings/str_cat.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<int> BuildGlobalAveragePooling(const LayerContext& ctx) {
  const Shape in = ctx.input_shape();
  if (in.rank() < 3) {
    return FieldError(ctx.where, absl::StrCat("input ", in.ToString(),
                                              " is not [batch, ..., channels] with axes to pool"));
  }
  std::vector<int64_t> axes;
  for (int a = 1; a + 1 < in.rank(); ++a) axes.push_back(a);
  return ctx.graph->Mean(ctx.input(), axes, /*keep_dims=*/false, ctx.name);
}

}  // namespace

void RegisterGlobalAveragePooling(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kGlobalAveragePooling, nullptr, BuildGlobalAveragePooling});
}

}  // namespace lockstep::engine
