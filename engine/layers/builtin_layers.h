// BuiltinLayers(): the registry of every layer kind the model builder offers (model.proto's
// Layer.kind). Each kind defines its settings' check and its builder in its own file,
// engine/layers/<kind>.cc, and registers them through the Register* function declared here
// (the activations, one op each and no settings, share activations.cc). A registry is a
// plain value: callers own it.
//
// Adding a layer kind: its field in Layer's oneof (proto/lockstep/v1/model.proto), a file
// engine/layers/<kind>.cc with its Register* function, and that function's line here and in
// BuiltinLayers(). builtin_layers_test fails for a oneof field without a registered builder.
#ifndef LOCKSTEP_ENGINE_LAYERS_BUILTIN_LAYERS_H_
#define LOCKSTEP_ENGINE_LAYERS_BUILTIN_LAYERS_H_

#include "engine/layer_registry.h"
#include "engine/must_register.h"

namespace lockstep::engine {

LayerRegistry BuiltinLayers();

// One per file under engine/layers/. A registration that fails (a kind registered twice) is
// a programming error: each file registers through MustRegister (must_register.h), which aborts
// with the reason.
void RegisterDense(LayerRegistry* r);                 // dense.cc
void RegisterConv2D(LayerRegistry* r);                // conv2d.cc
void RegisterMaxPool2D(LayerRegistry* r);             // maxpool2d.cc
void RegisterFlatten(LayerRegistry* r);               // flatten.cc
void RegisterReshape(LayerRegistry* r);               // reshape.cc
void RegisterActivations(LayerRegistry* r);           // relu, sigmoid, tanh, softmax, gelu
void RegisterDropout(LayerRegistry* r);               // dropout.cc
void RegisterAdd(LayerRegistry* r);                   // add.cc
void RegisterConcat(LayerRegistry* r);                // concat.cc
void RegisterGlobalAveragePooling(LayerRegistry* r);  // global_average_pooling.cc
void RegisterLayerNorm(LayerRegistry* r);             // layer_norm.cc
void RegisterEmbedding(LayerRegistry* r);             // embedding.cc
void RegisterSelfAttention(LayerRegistry* r);         // self_attention.cc
void RegisterBatchNorm(LayerRegistry* r);             // batch_norm.cc
void RegisterPositionEmbedding(LayerRegistry* r);     // position_embedding.cc

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_LAYERS_BUILTIN_LAYERS_H_
