// The activation layers: relu, sigmoid, tanh, softmax (over the last axis) and gelu (exact).
// Each is one op on its one input and has no settings, so they share this file.
#include "engine/layers/builtin_layers.h"

namespace lockstep::engine {
namespace {

LayerDef OneOp(v1::Layer::KindCase kind, v1::OpType op) {
  return {kind, nullptr,
          [op](const LayerContext& ctx) { return ctx.graph->Op(op, {ctx.input()}, ctx.name); }};
}

}  // namespace

void RegisterActivations(LayerRegistry* r) {
  MustRegister(r, OneOp(v1::Layer::kRelu, v1::RELU));
  MustRegister(r, OneOp(v1::Layer::kSigmoid, v1::SIGMOID));
  MustRegister(r, OneOp(v1::Layer::kTanh, v1::TANH));
  MustRegister(r, OneOp(v1::Layer::kSoftmax, v1::SOFTMAX));
  MustRegister(r, OneOp(v1::Layer::kGelu, v1::GELU));
}

}  // namespace lockstep::engine
