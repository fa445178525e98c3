// self_attention: multi-head SELF_ATTENTION over [batch, time, features] with "<name>/qkv"
// [d, 3d] and "<name>/output" [d, d] (Glorot uniform, no biases); num_heads divides d.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

// num_heads is checked here, not in a LayerCheck: its message names the feature size.
absl::StatusOr<int> BuildSelfAttention(const LayerContext& ctx) {
  const v1::SelfAttentionLayer& a = ctx.layer->self_attention();
  Graph* g = ctx.graph;
  const Shape in = ctx.input_shape();
  if (in.rank() != 3) {
    return FieldError(ctx.where,
                      absl::StrCat("input ", in.ToString(), " is not [batch, time, features]"));
  }
  const int64_t d = in.dim(2);
  if (a.num_heads() <= 0 || d % a.num_heads() != 0) {
    return FieldError(ctx.field("num_heads"),
                      absl::StrCat(a.num_heads(), " does not divide the feature size ", d));
  }
  LS_RETURN_IF_ERROR(CheckElements({d, 3 * d}, ctx.where, "the weights"));
  const v1::Initializer glorot = OrDefault({}, v1::Initializer::GLOROT_UNIFORM);
  const DType dtype = ctx.options.dtype;
  LS_ASSIGN_OR_RETURN(int w_qkv,
                      g->Variable(ctx.name + "/qkv", dtype, Shape{d, 3 * d}, glorot, d, 3 * d));
  LS_ASSIGN_OR_RETURN(int w_o, g->Variable(ctx.name + "/output", dtype, Shape{d, d}, glorot, d, d));
  return g->SelfAttention(ctx.input(), w_qkv, w_o, a.num_heads(), a.causal(), ctx.name);
}

}  // namespace

void RegisterSelfAttention(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kSelfAttention, nullptr, BuildSelfAttention});
}

}  // namespace lockstep::engine
