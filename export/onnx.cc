#include "export/onnx.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "export/onnx_graph.h"
#include "export/weights.h"

namespace lockstep::exporting {
namespace {

// A tensor type [batch, dims...] (FLOAT unless `elem_type`) for a graph input or output.
void SetType(const std::vector<int64_t>& dims, onnx::ValueInfoProto* info,
             onnx::TensorProto::DataType elem_type = onnx::TensorProto::FLOAT) {
  onnx::TypeProto::Tensor* t = info->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  t->mutable_shape()->add_dim()->set_dim_param("batch");
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

// Whether the data files hold the features as integers: TFRecord int64_lists (token ids),
// which the input pipeline converts to f32.
bool IntegerFeatures(const v1::DataSource& train) {
  if (train.format() != v1::DataSource::TFRECORD || train.tfrecord().features().empty()) {
    return false;
  }
  for (const v1::TfRecordFeature& f : train.tfrecord().features()) {
    if (f.dtype() != v1::TfRecordFeature::INT64) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> EncodeOnnx(const ExportRequest& request) {
  if (request.spec == nullptr) {
    return absl::InvalidArgumentError(
        "--spec: ONNX export needs the job's spec (the model's layers and its input "
        "transformations); give --spec=JOB.json");
  }
  const v1::ModelSpec& model = request.spec->model();
  if (!model.inputs().empty()) {
    return absl::InvalidArgumentError(
        "model.inputs: ONNX export covers models with one input (model.input_shape) so far");
  }
  if (model.f64()) {
    return absl::InvalidArgumentError("model.f64: ONNX export covers F32 models so far");
  }
  absl::StatusOr<Weights> weights = WeightsFromCheckpoint(*request.checkpoint, request.options);
  if (!weights.ok()) return weights.status();
  std::map<std::string, const v1::NamedTensor*> variables;
  for (const v1::NamedTensor& v : weights->tensors) variables[v.name()] = &v;
  absl::StatusOr<OnnxLayerRegistry> layers = BuiltinOnnxLayers();
  if (!layers.ok()) return layers.status();

  onnx::ModelProto m;
  m.set_ir_version(onnx::IR_VERSION);
  m.add_opset_import()->set_version(kOnnxOpset);
  m.set_producer_name("lockstep");
  m.set_model_version(request.checkpoint->global_step());
  m.set_doc_string(absl::StrCat("job ", request.checkpoint->job_id(), " at step ",
                                request.checkpoint->global_step()));
  for (const auto& [key, value] : weights->metadata) {
    onnx::StringStringEntryProto* e = m.add_metadata_props();
    e->set_key(key);
    e->set_value(value);
  }
  onnx::GraphProto* graph = m.mutable_graph();
  graph->set_name(request.spec->name().empty() ? "lockstep" : request.spec->name());
  OnnxGraph g(graph);
  OnnxValue x{"features", {model.input_shape().begin(), model.input_shape().end()}};
  if (IntegerFeatures(request.spec->data().train())) {
    // int64 ids in, as the files hold them; the model computes on their f32 values.
    SetType(x.dims, graph->add_input(), onnx::TensorProto::INT64);
    SetAttribute("to", int64_t{onnx::TensorProto::FLOAT},
                 g.AddNode("Cast", {x.name}, "features/f32"));
    x.name = "features/f32";
  } else {
    SetType(x.dims, graph->add_input());
  }
  graph->mutable_input(0)->set_name("features");

  const float scale = request.spec->data().train().feature_scale();
  if (scale != 0 && scale != 1) {
    // The input pipeline's Normalize({0}, {1 / scale}): (x - 0) / (1 / scale), in float.
    const std::string divisor = g.AddFloats("feature_scale/divisor", {}, {1.0f / scale});
    g.AddNode("Div", {x.name, divisor}, "feature_scale");
    x.name = "feature_scale";
  }
  // Every value a layer may take by name: the model's input, then each layer's output.
  std::map<std::string, OnnxValue> outputs = {{"features", x}};  // f32, as the layers see it
  for (int i = 0; i < model.layers_size(); ++i) {
    const v1::Layer& layer = model.layers(i);
    OnnxLayerContext c;
    c.layer = &layer;
    c.index = i;
    c.name = layer.name().empty() ? absl::StrCat(LayerKindName(layer.kind_case()), "_", i)
                                  : layer.name();
    for (int j = 0; j < layer.inputs_size(); ++j) {
      auto it = outputs.find(layer.inputs(j));
      if (it == outputs.end()) {
        return absl::InvalidArgumentError(absl::StrCat("layers[", i, "].inputs[", j,
                                                       "]: no layer or model input named '",
                                                       layer.inputs(j), "' before it"));
      }
      c.inputs.push_back(it->second);
    }
    if (c.inputs.empty()) c.inputs.push_back(x);
    c.input = c.inputs[0];
    c.variables = &variables;
    const OnnxLayerFn* fn = layers->Find(layer.kind_case());
    if (fn == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layers[", i, "] (", LayerKindName(layer.kind_case()), " \"", c.name,
          "\"): ONNX export has no mapping for layer kind ", LayerKindName(layer.kind_case())));
    }
    absl::StatusOr<OnnxValue> y = (*fn)(c, g);
    if (!y.ok()) return y.status();
    x = *std::move(y);
    outputs[c.name] = x;
  }
  g.AddNode("Identity", {x.name}, "output");
  SetType(x.dims, graph->add_output());
  graph->mutable_output(0)->set_name("output");
  return m.SerializeAsString();
}

absl::Status RegisterOnnx(FormatRegistry& registry) {
  return registry.Register({"onnx",
                            "the model as an ONNX inference graph (needs --spec): raw features "
                            "in, the job's featureScale inside",
                            EncodeOnnx});
}

}  // namespace lockstep::exporting
