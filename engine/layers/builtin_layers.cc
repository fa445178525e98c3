#include "engine/layers/builtin_layers.h"

namespace lockstep::engine {

LayerRegistry BuiltinLayers() {
  LayerRegistry r;
  RegisterDense(&r);
  RegisterConv2D(&r);
  RegisterMaxPool2D(&r);
  RegisterFlatten(&r);
  RegisterReshape(&r);
  RegisterActivations(&r);
  RegisterDropout(&r);
  RegisterAdd(&r);
  RegisterConcat(&r);
  RegisterGlobalAveragePooling(&r);
  RegisterLayerNorm(&r);
  RegisterEmbedding(&r);
  RegisterSelfAttention(&r);
  RegisterBatchNorm(&r);
  RegisterPositionEmbedding(&r);
  return r;
}

}  // namespace lockstep::engine
