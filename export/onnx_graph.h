// OnnxGraph: an ONNX graph (onnx.proto's GraphProto) as export/onnx.cc builds it, one value
// at a time, and the registry of how each Lockstep layer kind (model.proto's Layer.kind)
// becomes ONNX nodes. Each kind is one small function in onnx_layers.cc, registered by
// BuiltinOnnxLayers(); a kind with no entry is refused by name, never exported wrongly.
//
// Values carry their per-example dims (the batch dimension is the symbolic "batch"), so each
// layer knows its input's shape without the engine and the graph's output gets a full type.
//
// Thread model: one thread builds one graph; a filled registry is immutable.
#ifndef LOCKSTEP_EXPORT_ONNX_GRAPH_H_
#define LOCKSTEP_EXPORT_ONNX_GRAPH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lockstep/v1/model.pb.h"
#include "lockstep/v1/tensor.pb.h"
#include "onnx/onnx.pb.h"

namespace lockstep::exporting {

// A float value of the graph: its name and per-example dims.
struct OnnxValue {
  std::string name;
  std::vector<int64_t> dims;
};

class OnnxGraph {
 public:
  explicit OnnxGraph(onnx::GraphProto* graph) : graph_(graph) {}

  // Adds a node `op` of `inputs` named `name`, whose one output is named `name` too.
  onnx::NodeProto* AddNode(const std::string& op, const std::vector<std::string>& inputs,
                           const std::string& name);
  // A checkpoint variable as an initializer under its own name (F32 only).
  absl::StatusOr<std::string> AddVariable(const v1::NamedTensor& variable);
  // Constants the graph needs (a scale, a shape), as initializers named `name`.
  std::string AddFloats(const std::string& name, const std::vector<int64_t>& dims,
                        const std::vector<float>& values);
  std::string AddInt64s(const std::string& name, const std::vector<int64_t>& values);
  // A Transpose node of `input` by `perm`, named `name`.
  onnx::NodeProto* AddTranspose(const std::string& input, const std::vector<int64_t>& perm,
                                const std::string& name);

 private:
  onnx::GraphProto* graph_;  // not owned
};

// What a layer's export function sees.
struct OnnxLayerContext {
  const v1::Layer* layer = nullptr;
  int index = 0;
  std::string name;  // the layer's name as the model builder gives it ("dense_0" by default)
  OnnxValue input;   // inputs[0]
  std::vector<OnnxValue> inputs;  // every input, in order (several for add and concat)
  // The checkpoint's variables by name ("<layer>/kernel"); not owned.
  const std::map<std::string, const v1::NamedTensor*>* variables = nullptr;

  // The variable "<name>/<suffix>"; INVALID_ARGUMENT naming the layer when it is missing.
  absl::StatusOr<const v1::NamedTensor*> Variable(const std::string& suffix) const;
};

// Adds the attribute `name` to `node`: an INT, a FLOAT, or INTS.
void SetAttribute(const std::string& name, int64_t value, onnx::NodeProto* node);
void SetAttribute(const std::string& name, float value, onnx::NodeProto* node);
void SetAttribute(const std::string& name, const std::vector<int64_t>& values,
                  onnx::NodeProto* node);

// Adds the layer's nodes to `graph`; returns its output. INVALID_ARGUMENT naming the layer
// ("layers[2] (dense \"logits\")") for what the export cannot express.
using OnnxLayerFn = std::function<absl::StatusOr<OnnxValue>(const OnnxLayerContext&, OnnxGraph&)>;

class OnnxLayerRegistry {
 public:
  // ALREADY_EXISTS for a kind registered twice.
  absl::Status Register(v1::Layer::KindCase kind, OnnxLayerFn fn);
  // Null when the kind has no ONNX mapping.
  const OnnxLayerFn* Find(v1::Layer::KindCase kind) const;

 private:
  std::map<v1::Layer::KindCase, OnnxLayerFn> layers_;
};

// Every layer kind export maps (onnx_layers.cc).
absl::StatusOr<OnnxLayerRegistry> BuiltinOnnxLayers();

// The kind's name as model.proto's JSON writes it ("dense", "layer_norm").
std::string LayerKindName(v1::Layer::KindCase kind);

}  // namespace lockstep::exporting

#endif  // LOCKSTEP_EXPORT_ONNX_GRAPH_H_
