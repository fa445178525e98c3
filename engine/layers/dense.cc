// dense: MATMUL by "<name>/kernel" [fan_in, units] over the input's last axis (Keras: [b, ...,
// f] is multiplied as [b * ..., f] rows), then BIAS_ADD of "<name>/bias" unless no_bias.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

absl::Status CheckDense(const v1::Layer& layer, absl::string_view where) {
  const int64_t units = layer.dense().units();
  if (units <= 0)
    return FieldError(absl::StrCat(where, ".units"), absl::StrCat(units, " must be > 0"));
  return absl::OkStatus();
}

absl::StatusOr<int> BuildDense(const LayerContext& ctx) {
  const v1::DenseLayer& d = ctx.layer->dense();
  Graph* g = ctx.graph;
  const Shape in = ctx.input_shape();
  if (in.rank() < 2) {
    return FieldError(ctx.where,
                      absl::StrCat("input ", in.ToString(), " is not [batch, ..., features]"));
  }
  const int64_t fan_in = in[-1];
  LS_RETURN_IF_ERROR(CheckElements({fan_in, d.units()}, ctx.field("units"), "the kernel"));
  std::vector<int64_t> out_dims = in.dims();
  out_dims.back() = d.units();
  LS_RETURN_IF_ERROR(CheckElements(out_dims, ctx.field("units"), "the output"));
  LS_ASSIGN_OR_RETURN(
      int w, g->Variable(ctx.name + "/kernel", ctx.options.dtype, Shape{fan_in, d.units()},
                         OrDefault(d.kernel_initializer(), v1::Initializer::GLOROT_UNIFORM), fan_in,
                         d.units()));
  int rows = ctx.input();
  if (in.rank() > 2) {
    LS_ASSIGN_OR_RETURN(rows, g->Reshape(ctx.input(), {-1, fan_in}));
  }
  LS_ASSIGN_OR_RETURN(int y, g->Op(v1::MATMUL, {rows, w}, ctx.name + "/matmul"));
  if (!d.no_bias()) {
    LS_ASSIGN_OR_RETURN(int b, g->Variable(ctx.name + "/bias", ctx.options.dtype, Shape{d.units()},
                                           OrDefault(d.bias_initializer(), v1::Initializer::ZEROS),
                                           fan_in, d.units()));
    LS_ASSIGN_OR_RETURN(y, g->Op(v1::BIAS_ADD, {y, b}, ctx.name + "/bias_add"));
  }
  if (in.rank() == 2) return y;
  out_dims[0] = -1;
  return g->Reshape(y, out_dims);
}

}  // namespace

void RegisterDense(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kDense, CheckDense, BuildDense});
}

}  // namespace lockstep::engine
