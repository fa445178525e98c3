// embedding: EMBEDDING rows of "<name>/embeddings" [input_dim, output_dim] looked up by the
// input's integral values; the output gains an axis of output_dim.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

absl::Status CheckEmbedding(const v1::Layer& layer, absl::string_view where) {
  const v1::EmbeddingLayer& e = layer.embedding();
  if (e.input_dim() <= 0) {
    return FieldError(absl::StrCat(where, ".input_dim"),
                      absl::StrCat(e.input_dim(), " must be > 0"));
  }
  if (e.output_dim() <= 0) {
    return FieldError(absl::StrCat(where, ".output_dim"),
                      absl::StrCat(e.output_dim(), " must be > 0"));
  }
  return CheckElements({e.input_dim(), e.output_dim()}, absl::StrCat(where, ".input_dim"),
                       "the table");
}

absl::StatusOr<int> BuildEmbedding(const LayerContext& ctx) {
  const v1::EmbeddingLayer& e = ctx.layer->embedding();
  std::vector<int64_t> out = ctx.input_shape().dims();
  out.push_back(e.output_dim());
  LS_RETURN_IF_ERROR(CheckElements(out, ctx.field("output_dim"), "the output"));
  LS_ASSIGN_OR_RETURN(int table, ctx.graph->Variable(ctx.name + "/embeddings", ctx.options.dtype,
                                                     Shape{e.input_dim(), e.output_dim()},
                                                     OrDefault(e.embeddings_initializer(),
                                                               v1::Initializer::GLOROT_UNIFORM),
                                                     e.input_dim(), e.output_dim()));
  return ctx.graph->Op(v1::EMBEDDING, {ctx.input(), table}, ctx.name);
}

}  // namespace

void RegisterEmbedding(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kEmbedding, CheckEmbedding, BuildEmbedding});
}

}  // namespace lockstep::engine
