// Turns a user's ModelSpec (proto/lockstep/v1/model.proto, usually written as JSON) into a
// Graph: inputs "features" [batch, input_shape...] (or the spec's named `inputs`) and
// "labels" ([batch] i64 for SPARSE_CATEGORICAL_CROSSENTROPY, shaped like the output in
// f32/f64 for MSE), the layers' variables ("<layer>/kernel", "<layer>/bias", "<layer>/gamma",
// "<layer>/embeddings", ...), the loss, the output (the last layer: logits) and, for
// classification, an ACCURACY node. Layers form a graph: each takes the previous layer's
// output or the earlier layers and model inputs its `inputs` names.
//
// Every problem is refused with INVALID_ARGUMENT naming the layer index and field, e.g.
// "layers[2].dense.units: -5 must be > 0". Stateless functions: the model builder is a
// lookup of each layer's kind in a LayerRegistry (layer_registry.h), whose entries check the
// layer's settings and add its nodes.
#ifndef LOCKSTEP_ENGINE_MODEL_BUILDER_H_
#define LOCKSTEP_ENGINE_MODEL_BUILDER_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "lockstep/v1/model.pb.h"

namespace lockstep::engine {

// Each layer through its kind's entry in BuiltinLayers() (engine/layers/builtin_layers.h).
absl::StatusOr<Graph> BuildModel(const v1::ModelSpec& spec);
// The same with another registry (tests): a kind `layers` lacks is refused naming it.
absl::StatusOr<Graph> BuildModel(const v1::ModelSpec& spec, const LayerRegistry& layers);

// JSON (the proto JSON mapping: "inputShape" or "input_shape", enums by name) to specs.
// Unknown fields and unknown layer kinds are refused naming where they are.
absl::StatusOr<v1::ModelSpec> ParseModelSpecJson(absl::string_view json);
absl::StatusOr<v1::OptimizerSpec> ParseOptimizerSpecJson(absl::string_view json);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_MODEL_BUILDER_H_
