// layer_norm: LAYER_NORM over the last axis with "<name>/gamma" (ones) and "<name>/beta"
// (zeros); epsilon 1e-3 by default.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

float Epsilon(const v1::LayerNormLayer& l) { return l.epsilon() == 0 ? 1e-3f : l.epsilon(); }

absl::Status CheckLayerNorm(const v1::Layer& layer, absl::string_view where) {
  const float eps = Epsilon(layer.layer_norm());
  if (eps > 0) return absl::OkStatus();
  return FieldError(absl::StrCat(where, ".epsilon"), absl::StrCat(eps, " must be > 0"));
}

absl::StatusOr<int> BuildLayerNorm(const LayerContext& ctx) {
  Graph* g = ctx.graph;
  const Shape in = ctx.input_shape();
  if (in.rank() < 2) {
    return FieldError(ctx.where, absl::StrCat("input ", in.ToString(), " has no feature axis"));
  }
  const int64_t c = in[-1];
  const DType dtype = ctx.options.dtype;
  LS_ASSIGN_OR_RETURN(int gamma,
                      g->Variable(ctx.name + "/gamma", dtype, Shape{c}, Constant(1), c, c));
  LS_ASSIGN_OR_RETURN(int beta, g->Variable(ctx.name + "/beta", dtype, Shape{c},
                                            OrDefault({}, v1::Initializer::ZEROS), c, c));
  return g->LayerNorm(ctx.input(), gamma, beta, Epsilon(ctx.layer->layer_norm()), ctx.name);
}

}  // namespace

void RegisterLayerNorm(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kLayerNorm, CheckLayerNorm, BuildLayerNorm});
}

}  // namespace lockstep::engine
