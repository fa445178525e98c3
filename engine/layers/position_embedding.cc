// position_embedding: "<name>/embeddings" [time, features] added to the input [batch, time,
// features] (a BIAS_ADD, whose bias may be any trailing shape of its input).
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<int> BuildPositionEmbedding(const LayerContext& ctx) {
  const Shape in = ctx.input_shape();
  if (in.rank() != 3 || in.dim(1) < 1 || in.dim(2) < 1) {
    return FieldError(ctx.where,
                      absl::StrCat("input ", in.ToString(), " is not [batch, time, features]"));
  }
  LS_ASSIGN_OR_RETURN(
      int table,
      ctx.graph->Variable(ctx.name + "/embeddings", ctx.options.dtype, Shape{in.dim(1), in.dim(2)},
                          OrDefault(ctx.layer->position_embedding().embeddings_initializer(),
                                    v1::Initializer::GLOROT_UNIFORM),
                          in.dim(1), in.dim(2)));
  return ctx.graph->Op(v1::BIAS_ADD, {ctx.input(), table}, ctx.name);
}

}  // namespace

void RegisterPositionEmbedding(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kPositionEmbedding, nullptr, BuildPositionEmbedding});
}

}  // namespace lockstep::engine
