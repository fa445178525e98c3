#include "export/onnx_graph.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"

namespace lockstep::exporting {

onnx::NodeProto* OnnxGraph::AddNode(const std::string& op, const std::vector<std::string>& inputs,
                                    const std::string& name) {
  onnx::NodeProto* node = graph_->add_node();
  node->set_op_type(op);
  node->set_name(name);
  for (const std::string& in : inputs) node->add_input(in);
  node->add_output(name);
  return node;
}

absl::StatusOr<std::string> OnnxGraph::AddVariable(const v1::NamedTensor& variable) {
  if (variable.tensor().dtype() != v1::F32) {
    return absl::InvalidArgumentError(
        absl::StrCat(variable.name(), ": ONNX export covers F32 models; the variable is ",
                     v1::DType_Name(variable.tensor().dtype())));
  }
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(variable.name());
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : variable.tensor().shape().dims()) t->add_dims(d);
  t->set_raw_data(variable.tensor().content());  // little-endian, as ONNX's raw_data
  return variable.name();
}

std::string OnnxGraph::AddFloats(const std::string& name, const std::vector<int64_t>& dims,
                                 const std::vector<float>& values) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return name;
}

std::string OnnxGraph::AddInt64s(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto* t = graph_->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
  return name;
}

onnx::NodeProto* OnnxGraph::AddTranspose(const std::string& input, const std::vector<int64_t>& perm,
                                         const std::string& name) {
  onnx::NodeProto* node = AddNode("Transpose", {input}, name);
  SetAttribute("perm", perm, node);
  return node;
}

void SetAttribute(const std::string& name, int64_t value, onnx::NodeProto* node) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void SetAttribute(const std::string& name, float value, onnx::NodeProto* node) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

void SetAttribute(const std::string& name, const std::vector<int64_t>& values,
                  onnx::NodeProto* node) {
  onnx::AttributeProto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

absl::StatusOr<const v1::NamedTensor*> OnnxLayerContext::Variable(const std::string& suffix) const {
  const std::string full = absl::StrCat(name, "/", suffix);
  auto it = variables->find(full);
  if (it == variables->end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layers[", index, "] (", LayerKindName(layer->kind_case()), " \"", name,
        "\"): the checkpoint has no variable ", full, " (written for another model?)"));
  }
  return it->second;
}

absl::Status OnnxLayerRegistry::Register(v1::Layer::KindCase kind, OnnxLayerFn fn) {
  if (!layers_.emplace(kind, std::move(fn)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("ONNX export of layer kind ", LayerKindName(kind), " is registered twice"));
  }
  return absl::OkStatus();
}

const OnnxLayerFn* OnnxLayerRegistry::Find(v1::Layer::KindCase kind) const {
  auto it = layers_.find(kind);
  return it == layers_.end() ? nullptr : &it->second;
}

std::string LayerKindName(v1::Layer::KindCase kind) {
  const google::protobuf::FieldDescriptor* field =
      v1::Layer::descriptor()->FindFieldByNumber(static_cast<int>(kind));
  return field == nullptr ? "(no kind)" : field->name();
}

}  // namespace lockstep::exporting
