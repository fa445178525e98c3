// dropout: DROPOUT at `rate` in [0, 1) while training; the identity in evaluation.
#include "absl/strings/str_cat.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

absl::Status CheckDropout(const v1::Layer& layer, absl::string_view where) {
  const float rate = layer.dropout().rate();
  if (rate >= 0 && rate < 1) return absl::OkStatus();
  return FieldError(absl::StrCat(where, ".rate"), absl::StrCat(rate, " is not in [0, 1)"));
}

absl::StatusOr<int> BuildDropout(const LayerContext& ctx) {
  return ctx.graph->Dropout(ctx.input(), ctx.layer->dropout().rate(), ctx.name);
}

}  // namespace

void RegisterDropout(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kDropout, CheckDropout, BuildDropout});
}

}  // namespace lockstep::engine
