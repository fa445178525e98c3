// Turns a user's ModelSpec (proto/lockstep/v1/model.proto, usually written as JSON) into a
// Graph: inputs "features" [batch, input_shape...] and "labels" ([batch] i64 for
// SPARSE_CATEGORICAL_CROSSENTROPY, shaped like the output in f32/f64 for MSE), one
// variable pair "<layer>/kernel", "<layer>/bias" per dense or conv2d layer, the loss, the
// output (logits) and, for classification, an ACCURACY node.
//
// Every problem is refused with INVALID_ARGUMENT naming the layer index and field, e.g.
// "layers[2].dense.units: -5 must be > 0". Stateless functions.
#ifndef LOCKSTEP_ENGINE_MODEL_BUILDER_H_
#define LOCKSTEP_ENGINE_MODEL_BUILDER_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/graph.h"
#include "lockstep/v1/model.pb.h"

namespace lockstep::engine {

absl::StatusOr<Graph> BuildModel(const v1::ModelSpec& spec);

// JSON (the proto JSON mapping: "inputShape" or "input_shape", enums by name) to specs.
// Unknown fields and unknown layer kinds are refused naming where they are.
absl::StatusOr<v1::ModelSpec> ParseModelSpecJson(absl::string_view json);
absl::StatusOr<v1::OptimizerSpec> ParseOptimizerSpecJson(absl::string_view json);

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_MODEL_BUILDER_H_
