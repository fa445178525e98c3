// batch_norm: BATCH_NORM over the last axis with the trainable "<name>/gamma", "<name>/beta"
// and the non-trainable "<name>/moving_mean", "<name>/moving_variance"; momentum 0.99 and
// epsilon 1e-3 by default; virtual_batch_size (ghost batch norm) or synchronized (the
// global batch's statistics), not both.
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

float Epsilon(const v1::BatchNormLayer& b) { return b.epsilon() == 0 ? 1e-3f : b.epsilon(); }
float Momentum(const v1::BatchNormLayer& b) { return b.momentum() == 0 ? 0.99f : b.momentum(); }

absl::Status CheckBatchNorm(const v1::Layer& layer, absl::string_view where) {
  const v1::BatchNormLayer& b = layer.batch_norm();
  const float eps = Epsilon(b);
  const float momentum = Momentum(b);
  if (!(eps > 0)) {
    return FieldError(absl::StrCat(where, ".epsilon"), absl::StrCat(eps, " must be > 0"));
  }
  if (!(momentum > 0 && momentum < 1)) {
    return FieldError(absl::StrCat(where, ".momentum"),
                      absl::StrCat(momentum, " is not in (0, 1)"));
  }
  if (b.virtual_batch_size() < 0) {
    return FieldError(absl::StrCat(where, ".virtual_batch_size"),
                      absl::StrCat(b.virtual_batch_size(), " must be >= 0"));
  }
  if (b.synchronized() && b.virtual_batch_size() > 0) {
    return FieldError(absl::StrCat(where, ".synchronized"),
                      "statistics over the global batch exclude virtual_batch_size groups");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> BuildBatchNorm(const LayerContext& ctx) {
  const v1::BatchNormLayer& b = ctx.layer->batch_norm();
  const Shape in = ctx.input_shape();
  if (in.rank() < 2) {
    return FieldError(ctx.where, absl::StrCat("input ", in.ToString(), " has no channel axis"));
  }
  const int64_t c = in[-1];
  const v1::Initializer ones = Constant(1);
  const v1::Initializer zeros = OrDefault({}, v1::Initializer::ZEROS);
  std::vector<int> xs = {ctx.input()};
  for (const auto& [suffix, init, trainable] :
       {std::tuple{"/gamma", ones, true}, std::tuple{"/beta", zeros, true},
        std::tuple{"/moving_mean", zeros, false}, std::tuple{"/moving_variance", ones, false}}) {
    LS_ASSIGN_OR_RETURN(int v, ctx.graph->Variable(ctx.name + suffix, ctx.options.dtype, Shape{c},
                                                   init, c, c, trainable));
    xs.push_back(v);
  }
  return ctx.graph->BatchNorm(xs, Momentum(b), Epsilon(b), ctx.name, b.virtual_batch_size(),
                              b.synchronized());
}

}  // namespace

void RegisterBatchNorm(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kBatchNorm, CheckBatchNorm, BuildBatchNorm});
}

}  // namespace lockstep::engine
