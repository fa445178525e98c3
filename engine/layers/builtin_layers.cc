#include "engine/layers/builtin_layers.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace lockstep::engine {

void MustRegister(LayerRegistry* r, LayerDef def) {
  absl::Status s = r->Register(std::move(def));
  if (!s.ok()) {
    std::fprintf(stderr, "engine layer registry: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
}

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
