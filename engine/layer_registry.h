// LayerRegistry: everything the model builder knows about each layer kind (model.proto's
// `Layer.kind` oneof), in one place: its name (the oneof field's name, which is the JSON key
// users write: "dense", "layer_norm"), how many inputs it takes, the validation of its own
// settings and its builder (the graph nodes and variables it adds). Each kind registers
// itself from its own file under engine/layers/ (BuiltinLayers() in
// engine/layers/builtin_layers.h builds the registry of them all), as ops do under
// engine/ops/; BuildModel (model_builder.h) is a lookup in it.
//
// The registry is a plain value, never a process-wide instance: registration is an explicit
// list of calls, so it depends neither on static initialisation order nor on the linker
// keeping otherwise unreferenced objects. Thread model: filled on one thread by Register; a
// filled registry is immutable and may be read from any thread.
#ifndef LOCKSTEP_ENGINE_LAYER_REGISTRY_H_
#define LOCKSTEP_ENGINE_LAYER_REGISTRY_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/dtype.h"
#include "engine/graph.h"
#include "engine/shape.h"
#include "lockstep/v1/model.pb.h"

namespace lockstep::engine {

// What a whole model's spec decides for every one of its layers. BuildModel fills it once
// from the ModelSpec; a spec-wide setting that reaches the layers becomes a field here, with
// its default, and no builder's signature changes.
struct LayerOptions {
  DType dtype = DType::kF32;  // variables and activations (ModelSpec.f64: kF64)
};

// What a layer's builder sees: layer `index` of the spec, to add on top of `inputs`.
struct LayerContext {
  Graph* graph = nullptr;            // not owned
  const v1::Layer* layer = nullptr;  // not owned
  int index = 0;
  std::string name;         // the layer's name: `layer.name`, or "<kind>_<index>"
  std::string where;        // where its errors point: "layers[3].dense"
  std::vector<int> inputs;  // input nodes, in order: one, unless the kind joins several
  LayerOptions options;

  int input() const { return inputs[0]; }
  Shape input_shape() const { return graph->shape(inputs[0]); }
  // "layers[3].dense.units".
  std::string field(absl::string_view name) const;
};

// Checks a layer's own settings, before any node exists (what needs the input's shape is
// the builder's to check). INVALID_ARGUMENT naming the field: "<where>.units: -5 must be > 0".
using LayerCheck = std::function<absl::Status(const v1::Layer& layer, absl::string_view where)>;
// Adds the layer's nodes and variables; returns its output node. Runs only after the kind's
// LayerCheck passed. INVALID_ARGUMENT naming `ctx.where` (or one of its fields) for what the
// input cannot take; BuildModel prefixes an error that names no layer (the graph's, e.g.
// "ADD node 'add_3': shapes [?,4] and [?,5] differ") with `ctx.where`.
using LayerBuilder = std::function<absl::StatusOr<int>(const LayerContext& ctx)>;

enum class LayerInputs {
  kOne,      // the previous layer's output, or the one input `inputs` names
  kSeveral,  // two or more, named by `inputs` (add, concat)
};

// Written in each kind's file as {kind, check, build} (and LayerInputs::kSeveral for joins).
struct LayerDef {
  v1::Layer::KindCase kind = v1::Layer::KIND_NOT_SET;
  LayerCheck check;    // optional: kinds without settings have nothing to check
  LayerBuilder build;  // required
  LayerInputs inputs = LayerInputs::kOne;
  // Filled by Register from model.proto's descriptor: the oneof field's name ("layer_norm").
  std::string name;
};

class LayerRegistry {
 public:
  // What MustRegister (must_register.h) registers, and names in its abort message.
  using Def = LayerDef;
  static constexpr char kName[] = "engine layer registry";

  // INVALID_ARGUMENT for a kind that is not a field of Layer's oneof or a def without a
  // builder; ALREADY_EXISTS when the kind is registered twice.
  absl::Status Register(LayerDef def);
  // Null when the kind is not registered.
  const LayerDef* Find(v1::Layer::KindCase kind) const;
  // The registered kinds' names, in the oneof's field-number order.
  std::vector<std::string> names() const;
  std::vector<v1::Layer::KindCase> kinds() const;

  // The kind's name as model.proto spells it ("layer_norm"); "" for KIND_NOT_SET or a
  // number the oneof does not have.
  static std::string KindName(v1::Layer::KindCase kind);

 private:
  std::map<v1::Layer::KindCase, LayerDef> layers_;
};

}  // namespace lockstep::engine

#endif  // LOCKSTEP_ENGINE_LAYER_REGISTRY_H_
