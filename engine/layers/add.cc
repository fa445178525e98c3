// add: the sum of two or more inputs of one shape, ADD left to right ("<name>/1", ...; the
// last one is "<name>").
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "engine/layers/builtin_layers.h"

namespace lockstep::engine {
namespace {

absl::StatusOr<int> BuildAdd(const LayerContext& ctx) {
  const std::vector<int>& xs = ctx.inputs;
  int sum = xs[0];
  for (size_t j = 1; j < xs.size(); ++j) {
    LS_ASSIGN_OR_RETURN(
        sum, ctx.graph->Op(v1::ADD, {sum, xs[j]},
                           j + 1 == xs.size() ? ctx.name : absl::StrCat(ctx.name, "/", j)));
  }
  return sum;
}

}  // namespace

void RegisterAdd(LayerRegistry* r) {
  MustRegister(r, {v1::Layer::kAdd, nullptr, BuildAdd, LayerInputs::kSeveral});
}

}  // namespace lockstep::engine
