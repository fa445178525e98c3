// reshape: RESHAPE each example to `shape` (one -1 allowed, resolved here so that the batch
// keeps the graph's -1).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/layers/builtin_layers.h"
#include "engine/layers/layer_util.h"

namespace lockstep::engine {
namespace {

// [-1 (the batch), shape...].
std::vector<int64_t> Target(const v1::ReshapeLayer& r) {
  std::vector<int64_t> target = {-1};
  target.insert(target.end(), r.shape().begin(), r.shape().end());
  return target;
}

absl::Status CheckReshape(const v1::Layer& layer, absl::string_view where) {
  const std::string field = absl::StrCat(where, ".shape");
  for (int64_t d : layer.reshape().shape()) {
    if (d == 0 || d < -1) return FieldError(field, absl::StrCat(d, " is not a dimension"));
  }
  return CheckElements(Target(layer.reshape()), field, "the shape");
}

absl::StatusOr<int> BuildReshape(const LayerContext& ctx) {
  std::vector<int64_t> target = Target(ctx.layer->reshape());
  const Shape in = ctx.input_shape();
  const int64_t known = *Elements(target);   // CheckReshape bounded it
  const int64_t per = *Elements(in.dims());  // every layer's output was checked
  const bool has_unknown = std::count(target.begin() + 1, target.end(), -1) > 0;
  if (has_unknown ? per % known != 0 : per != known) {
    return FieldError(ctx.field("shape"),
                      absl::StrCat("cannot reshape ", in.ToString(), " to [?,",
                                   absl::StrJoin(ctx.layer->reshape().shape(), ","), "]"));
  }
  if (has_unknown) {  // resolve the per-example -1 so the batch keeps the -1
    for (size_t j = 1; j < target.size(); ++j) {
      if (target[j] == -1) target[j] = per / known;
    }
  }
  return ctx.graph->Reshape(ctx.input(), target);
}

}  // namespace

void RegisterReshape(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kReshape, CheckReshape, BuildReshape});
}

}  // namespace lockstep::engine
