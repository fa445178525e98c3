// conv2d: CONV2D of an NHWC input by "<name>/kernel" [kh, kw, c_in, filters] (strides,
// padding VALID by default), then BIAS_ADD of "<name>/bias" unless no_bias.
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

absl::Status CheckConv2D(const v1::Layer& layer, absl::string_view where) {
  const v1::Conv2DLayer& c = layer.conv2d();
  if (c.filters() <= 0) {
    return FieldError(absl::StrCat(where, ".filters"), absl::StrCat(c.filters(), " must be > 0"));
  }
  const std::string kernel_size = absl::StrCat(where, ".kernel_size");
  if (c.kernel_size().empty()) return FieldError(kernel_size, "is required");
  LS_RETURN_IF_ERROR(Pair(c.kernel_size(), kernel_size, 1).status());
  return Pair(c.strides(), absl::StrCat(where, ".strides"), 1).status();
}

absl::StatusOr<int> BuildConv2D(const LayerContext& ctx) {
  const v1::Conv2DLayer& c = ctx.layer->conv2d();
  Graph* g = ctx.graph;
  LS_ASSIGN_OR_RETURN(std::vector<int> k, Pair(c.kernel_size(), ctx.field("kernel_size"), 1));
  LS_ASSIGN_OR_RETURN(std::vector<int> s, Pair(c.strides(), ctx.field("strides"), 1));
  const Shape in = ctx.input_shape();
  if (in.rank() != 4) {
    return FieldError(ctx.where, absl::StrCat("input ", in.ToString(),
                                              " is not [batch, height, width, channels]; set "
                                              "input_shape to [h, w, c] or add a reshape layer"));
  }
  const int64_t cin = in.dim(3);
  LS_RETURN_IF_ERROR(CheckElements({k[0], k[1], cin, c.filters()}, ctx.where, "the kernel"));
  const int64_t fan_in = int64_t{k[0]} * k[1] * cin;
  const int64_t fan_out = int64_t{k[0]} * k[1] * c.filters();
  LS_ASSIGN_OR_RETURN(
      int f,
      g->Variable(ctx.name + "/kernel", ctx.options.dtype, Shape{k[0], k[1], cin, c.filters()},
                  OrDefault(c.kernel_initializer(), v1::Initializer::GLOROT_UNIFORM), fan_in,
                  fan_out));
  v1::Padding padding = c.padding() == v1::PADDING_UNSPECIFIED ? v1::VALID : c.padding();
  LS_ASSIGN_OR_RETURN(int y, g->Conv2D(ctx.input(), f, s, padding, ctx.name + "/conv"));
  if (c.no_bias()) return y;
  LS_ASSIGN_OR_RETURN(
      int b, g->Variable(ctx.name + "/bias", ctx.options.dtype, Shape{c.filters()},
                         OrDefault(c.bias_initializer(), v1::Initializer::ZEROS), fan_in, fan_out));
  return g->Op(v1::BIAS_ADD, {y, b}, ctx.name + "/bias_add");
}

}  // namespace

void RegisterConv2D(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kConv2D, CheckConv2D, BuildConv2D});
}

}  // namespace lockstep::engine
